//! Plain JavaScript values from Rust: a value described for an error message, an object's
//! property, an object built from entries. (Below the API and the file sources, which both use
//! them.)

use wasm_bindgen::prelude::*;
use wasm_bindgen::JsCast;

/// Describes a JS value for an error message: `the string "3"`, `1.5`, `NaN`, `undefined`, `a
/// Uint8Array` ...
pub(crate) fn describe(v: &JsValue) -> String {
    if let Some(s) = v.as_string() {
        return format!("the string {s:?}");
    }
    if v.is_undefined() {
        return "undefined".into();
    }
    if v.is_null() {
        return "null".into();
    }
    if let Some(x) = v.as_f64() {
        return js_number(x);
    }
    if let Some(b) = v.as_bool() {
        return b.to_string();
    }
    if v.is_bigint() {
        return format!("the BigInt {}", String::from(js_sys::JsString::from(v.clone())));
    }
    if v.is_function() {
        return "a function".into();
    }
    if js_sys::Array::is_array(v) {
        return "an array".into();
    }
    let name = js_sys::Reflect::get(v, &"constructor".into())
        .ok()
        .and_then(|c| js_sys::Reflect::get(&c, &"name".into()).ok())
        .and_then(|n| n.as_string())
        .filter(|n| !n.is_empty());
    match name {
        Some(n) if n.starts_with(['A', 'E', 'I', 'O']) => format!("an {n}"),
        Some(n) => format!("a {n}"),
        None => "an object".into(),
    }
}

/// A number as JS prints it (`NaN`, `Infinity`).
pub(crate) fn js_number(x: f64) -> String {
    if x.is_nan() {
        "NaN".into()
    } else if x.is_infinite() {
        if x > 0.0 {
            "Infinity".into()
        } else {
            "-Infinity".into()
        }
    } else {
        format!("{x}")
    }
}

/// The message of a thrown JS value (an `Error`'s `message`), else [`describe`].
pub(crate) fn describe_error(e: &JsValue) -> String {
    match e.dyn_ref::<js_sys::Error>() {
        Some(err) => String::from(err.message()),
        None => describe(e),
    }
}

/// `target[key]`, or `undefined` where reading it throws.
pub(crate) fn get(target: &JsValue, key: &str) -> JsValue {
    js_sys::Reflect::get(target, &JsValue::from_str(key)).unwrap_or(JsValue::UNDEFINED)
}

/// A plain object of `entries`.
pub(crate) fn object(entries: &[(&str, JsValue)]) -> JsValue {
    let o = js_sys::Object::new();
    for (k, v) in entries {
        let _ = js_sys::Reflect::set(&o, &JsValue::from_str(k), v);
    }
    o.into()
}
