//! Adopting the host page's `GPUDevice` in wgpu 30 (wasm32 only).
//!
//! The host page owns the WebGPU device: it calls `navigator.gpu.requestAdapter()` and
//! `adapter.requestDevice({ requiredLimits, requiredFeatures })` itself and hands the `GPUDevice`
//! to us. wgpu 30 can expose its device as a JS object (`Device::as_webgpu`) but cannot wrap an
//! existing one, so [`adopt_device`] uses the following technique (it depends on the internals
//! of wgpu's WebGPU backend, hence `wgpu = "=30.0.2"`):
//!
//! * wgpu's WebGPU backend reads `navigator.gpu` exactly once, inside `wgpu::Instance::new`, and
//!   afterwards only calls `requestAdapter()` on that object, then `features`, `limits`, `info`
//!   and `requestDevice()` on the adapter it resolves to, and `queue`/`features`/`limits`/
//!   `adapterInfo` on the device. None of these calls check `instanceof`.
//! * So, synchronously (no other JS can run in between), we define an own, configurable `gpu`
//!   property on `navigator` (it shadows the `Navigator.prototype` getter) whose
//!   `requestAdapter()` resolves to an adapter-like object that mirrors the host device's
//!   `features`, `limits` and `adapterInfo` and whose `requestDevice()` resolves to the host's
//!   device itself; `wgslLanguageFeatures` and `getPreferredCanvasFormat` are forwarded to the
//!   real `navigator.gpu`. We create the `Instance` and restore `navigator` (the own property is
//!   deleted, or a pre-existing own property is put back).
//! * Then we request the adapter and the device through wgpu with the adapter's (= the host
//!   device's) features and limits, and check with `Object.is` that wgpu's device and queue are
//!   the host's `GPUDevice` and its `queue`. If a wgpu upgrade breaks the technique, this check
//!   fails loudly with "could not adopt the host's GPUDevice: ...".
//!
//! The functions of the fake objects are built from `Function.prototype.bind` on built-ins
//! (`Promise.resolve.bind(Promise, x)`, `gpu.getPreferredCanvasFormat.bind(gpu)`): no Rust
//! closures are leaked or invalidated and no code is `eval`ed (works under a strict CSP).
//!
//! Ownership: the host owns the device. Never call `Device::destroy()` on an adopted device.
//! `Drop` of wgpu's web objects is a no-op, so buffers created through wgpu must be freed with
//! `Buffer::destroy()` when the model is disposed.
//!
//! Only `js-sys`, `wasm-bindgen` and `wgpu` are used (no `web_sys::Gpu*` types, which need
//! `--cfg=web_sys_unstable_apis`): the host device is passed as a plain `JsValue` (a
//! `web_sys::GpuDevice` derefs to one).
#![cfg(target_arch = "wasm32")]

use wasm_bindgen::prelude::*;

use crate::gpu::Gpu;

/// A wgpu device and queue that wrap the host page's `GPUDevice` (the very same JS object).
pub struct Adopted {
    /// The host's `GPUDevice` as a wgpu device (`device.as_webgpu()` is the host's object).
    pub device: wgpu::Device,
    /// The host device's `queue` as a wgpu queue.
    pub queue: wgpu::Queue,
    /// The host device's limits, as wgpu reports them (what the host requested, not the
    /// adapter's maximum).
    pub limits: wgpu::Limits,
    /// The host device's features, as wgpu maps them.
    pub features: wgpu::Features,
    /// The subgroup size the kernels are compiled for, where the host created the device with
    /// the `subgroups` feature (see `subgroup_choice`): wgpu's WebGPU backend does not report the
    /// feature, so it is read from JS here.
    pub subgroup: Option<u32>,
    /// Whether the adapter's subgroup size is a range, fixed per kernel with `@subgroup_size`
    /// (the device has `subgroup-size-control`).
    pub size_control: bool,
    /// Whether WGSL's `dot4I8Packed` is there (`navigator.gpu.wgslLanguageFeatures` has
    /// `packed_4x8_integer_dot_product`: a language feature, no device feature to request).
    pub packed_dot: bool,
    /// `GPUAdapterInfo` of the host device: non-empty fields of vendor / architecture / device /
    /// description, joined with " / " (e.g. "google / swiftshader / ... ").
    pub adapter_info: String,
}

// Own minimal bindings (stable across js-sys API/cfg changes).
#[wasm_bindgen]
extern "C" {
    #[wasm_bindgen(js_namespace = Reflect, js_name = get, catch)]
    fn reflect_get(target: &JsValue, key: &str) -> Result<JsValue, JsValue>;
    #[wasm_bindgen(js_namespace = Reflect, js_name = set, catch)]
    fn reflect_set(target: &JsValue, key: &str, value: &JsValue) -> Result<bool, JsValue>;
    #[wasm_bindgen(js_namespace = Reflect, js_name = defineProperty, catch)]
    fn reflect_define_property(target: &JsValue, key: &str, attributes: &JsValue) -> Result<bool, JsValue>;
    #[wasm_bindgen(js_namespace = Reflect, js_name = deleteProperty, catch)]
    fn reflect_delete_property(target: &JsValue, key: &str) -> Result<bool, JsValue>;
    #[wasm_bindgen(js_namespace = Object, js_name = getOwnPropertyDescriptor, catch)]
    fn get_own_property_descriptor(target: &JsValue, key: &str) -> Result<JsValue, JsValue>;

    /// Any JS function, for `Function.prototype.bind`.
    type BindableFunction;
    #[wasm_bindgen(method, catch, js_name = bind)]
    fn bind0(this: &BindableFunction, this_arg: &JsValue) -> Result<JsValue, JsValue>;
    #[wasm_bindgen(method, catch, js_name = bind)]
    fn bind1(this: &BindableFunction, this_arg: &JsValue, arg: &JsValue) -> Result<JsValue, JsValue>;
}

fn fail(what: impl core::fmt::Display) -> String {
    format!("could not adopt the host's GPUDevice: {what}")
}

fn js_text(value: &JsValue) -> String {
    if let Some(s) = value.as_string() {
        return s;
    }
    if let Ok(message) = reflect_get(value, "message") {
        if let Some(m) = message.as_string() {
            let name = reflect_get(value, "name").ok().and_then(|n| n.as_string());
            return match name {
                Some(n) => format!("{n}: {m}"),
                None => m,
            };
        }
    }
    format!("{value:?}")
}

fn get(target: &JsValue, key: &str) -> Result<JsValue, String> {
    reflect_get(target, key).map_err(|e| fail(format!("reading `{key}` threw {}", js_text(&e))))
}

fn get_object(target: &JsValue, key: &str, what: &str) -> Result<JsValue, String> {
    let value = get(target, key)?;
    if value.is_object() {
        Ok(value)
    } else {
        Err(fail(format!("{what}.{key} is not an object (got {value:?})")))
    }
}

fn set(target: &JsValue, key: &str, value: &JsValue) -> Result<(), String> {
    match reflect_set(target, key, value) {
        Ok(true) => Ok(()),
        Ok(false) => Err(fail(format!("could not set `{key}`"))),
        Err(e) => Err(fail(format!("setting `{key}` threw {}", js_text(&e)))),
    }
}

/// `Promise.resolve.bind(Promise, value)`: a function that ignores its arguments and returns
/// a promise resolving to `value`.
fn resolving_function(value: &JsValue) -> Result<JsValue, String> {
    let promise_ctor = get(&js_sys::global(), "Promise")?;
    let resolve = get(&promise_ctor, "resolve")?;
    resolve.unchecked_ref::<BindableFunction>().bind1(&promise_ctor, value).map_err(|e| fail(format!("Promise.resolve.bind threw {}", js_text(&e))))
}

/// Whether the set-like `set` (a `GPUSupportedFeatures` or `WGSLLanguageFeatures`) has `name`.
fn has(set: &JsValue, name: &str) -> bool {
    let Some(f) = reflect_get(set, "has").ok().and_then(|f| f.dyn_into::<js_sys::Function>().ok()) else {
        return false;
    };
    f.call1(set, &JsValue::from_str(name)).ok().and_then(|v| v.as_bool()).unwrap_or(false)
}

/// [`crate::gpu::subgroup_for`] of the adapter `info`'s subgroup sizes, where the device's
/// `features` hold `subgroups` (Dawn reports one size for Vulkan devices with a fixed size:
/// NVIDIA on Linux and ChromeOS, Mali, SwiftShader; a range on D3D12 and on Vulkan for Intel and
/// AMD, which `subgroup-size-control` fixes per kernel; Metal has no size control).
fn subgroup_choice(features: &JsValue, info: &JsValue) -> Option<(u32, bool)> {
    if !has(features, "subgroups") {
        return None;
    }
    let size = |k: &str| reflect_get(info, k).ok()?.as_f64().filter(|x| x.fract() == 0.0 && *x >= 1.0 && *x <= 1024.0).map(|x| x as u32);
    crate::gpu::subgroup_for(size("subgroupMinSize")?, size("subgroupMaxSize")?, has(features, "subgroup-size-control"))
}

fn string_field(target: &JsValue, key: &str) -> String {
    reflect_get(target, key).ok().and_then(|v| v.as_string()).unwrap_or_default()
}

/// Shadows `navigator.gpu` with an own property while alive; restores `navigator` on drop
/// (deletes the own property, or puts back an own property that was there before).
struct NavigatorGpuOverride {
    navigator: JsValue,
    previous_own: JsValue,
}

impl NavigatorGpuOverride {
    fn install(navigator: &JsValue, fake_gpu: &JsValue) -> Result<Self, String> {
        let previous_own = get_own_property_descriptor(navigator, "gpu").map_err(|e| fail(format!("getOwnPropertyDescriptor threw {}", js_text(&e))))?;
        let descriptor = js_sys::Object::new();
        set(&descriptor, "value", fake_gpu)?;
        set(&descriptor, "configurable", &JsValue::TRUE)?;
        set(&descriptor, "enumerable", &JsValue::TRUE)?;
        set(&descriptor, "writable", &JsValue::FALSE)?;
        match reflect_define_property(navigator, "gpu", &descriptor) {
            Ok(true) => Ok(Self { navigator: navigator.clone(), previous_own }),
            Ok(false) => Err(fail("navigator.gpu could not be redefined (non-configurable)")),
            Err(e) => Err(fail(format!("defining navigator.gpu threw {}", js_text(&e)))),
        }
    }
}

impl Drop for NavigatorGpuOverride {
    fn drop(&mut self) {
        if self.previous_own.is_undefined() {
            let _ = reflect_delete_property(&self.navigator, "gpu");
        } else {
            let _ = reflect_define_property(&self.navigator, "gpu", &self.previous_own);
        }
    }
}

/// Wraps the host page's `GPUDevice` (`host`, e.g. a `web_sys::GpuDevice` or a `JsValue` from
/// JS) in a `wgpu::Device` + `wgpu::Queue` that are that same device and its queue.
///
/// The host decides the limits and features (e.g. `requiredLimits: { maxStorageBufferBindingSize:
/// 256 MiB }`); they are reported back in [`Adopted::limits`]/[`Adopted::features`].
/// Must run on the main thread or in a dedicated worker (where `navigator.gpu` exists).
/// Errors are strings starting with "could not adopt the host's GPUDevice: ".
pub async fn adopt_device(host: &JsValue) -> Result<Adopted, String> {
    // 1. Sanity-check the host device and gather what the fake adapter mirrors.
    if !host.is_object() {
        return Err(fail(format!("expected a GPUDevice, got {host:?}")));
    }
    let host_queue = get_object(host, "queue", "device")?;
    if !get(host, "createBuffer")?.is_function() {
        return Err(fail("the value passed is not a GPUDevice (no createBuffer method)"));
    }
    let features = get_object(host, "features", "device")?;
    let limits = get_object(host, "limits", "device")?;
    let mut info = get(host, "adapterInfo")?;
    if !info.is_object() {
        // Browsers before GPUDevice.adapterInfo: an empty GPUAdapterInfo-like object.
        let empty = js_sys::Object::new();
        for key in ["vendor", "architecture", "device", "description"] {
            set(&empty, key, &JsValue::from_str(""))?;
        }
        set(&empty, "isFallbackAdapter", &JsValue::FALSE)?;
        info = empty.into();
    }
    let (subgroup, size_control) = subgroup_choice(&features, &info).map_or((None, false), |(n, c)| (Some(n), c));
    let adapter_info = {
        let parts: Vec<String> = ["vendor", "architecture", "device", "description"].iter().map(|k| string_field(&info, k)).filter(|s| !s.is_empty()).collect();
        if parts.is_empty() {
            "unknown adapter".to_string()
        } else {
            parts.join(" / ")
        }
    };

    let global = js_sys::global();
    let navigator = get_object(&global, "navigator", "globalThis")?;
    let real_gpu = get(&navigator, "gpu")?;
    if !real_gpu.is_object() {
        return Err(fail("navigator.gpu is not available in this context"));
    }
    let packed_dot = has(&get(&real_gpu, "wgslLanguageFeatures")?, "packed_4x8_integer_dot_product");

    // 2. The adapter-like object and the fake `GPU`.
    let adapter = js_sys::Object::new();
    set(&adapter, "features", &features)?;
    set(&adapter, "limits", &limits)?;
    set(&adapter, "info", &info)?;
    set(&adapter, "isFallbackAdapter", &get(&info, "isFallbackAdapter")?.as_bool().unwrap_or(false).into())?;
    set(&adapter, "requestDevice", &resolving_function(host)?)?;

    let fake_gpu = js_sys::Object::new();
    set(&fake_gpu, "requestAdapter", &resolving_function(&adapter)?)?;
    set(&fake_gpu, "wgslLanguageFeatures", &get(&real_gpu, "wgslLanguageFeatures")?)?;
    let preferred = get(&real_gpu, "getPreferredCanvasFormat")?;
    if preferred.is_function() {
        let bound = preferred
            .unchecked_ref::<BindableFunction>()
            .bind0(&real_gpu)
            .map_err(|e| fail(format!("binding getPreferredCanvasFormat threw {}", js_text(&e))))?;
        set(&fake_gpu, "getPreferredCanvasFormat", &bound)?;
    }

    // 3. wgpu reads navigator.gpu once, here, synchronously.
    let instance = {
        let _override = NavigatorGpuOverride::install(&navigator, &fake_gpu)?;
        if !js_sys::Object::is(&get(&navigator, "gpu")?, &fake_gpu) {
            return Err(fail("navigator.gpu could not be shadowed"));
        }
        let mut desc = wgpu::InstanceDescriptor::new_without_display_handle();
        desc.backends = wgpu::Backends::BROWSER_WEBGPU;
        wgpu::Instance::new(desc)
    }; // navigator restored here
    if !js_sys::Object::is(&get(&navigator, "gpu")?, &real_gpu) {
        return Err(fail("navigator.gpu was not restored"));
    }

    // 4. Adapter and device through wgpu, with the host device's features and limits.
    let wgpu_adapter = instance.request_adapter(&wgpu::RequestAdapterOptions::default()).await.map_err(|e| fail(format!("request_adapter: {e}")))?;
    let (device, queue) = wgpu_adapter
        .request_device(&wgpu::DeviceDescriptor {
            label: None,
            required_features: wgpu_adapter.features(),
            required_limits: wgpu_adapter.limits(),
            ..Default::default()
        })
        .await
        .map_err(|e| fail(format!("request_device: {e}")))?;

    // 5. Proof that it is the same device and queue.
    let Some(js_device) = device.as_webgpu() else {
        return Err(fail("wgpu did not create a WebGPU-backend device"));
    };
    if !js_sys::Object::is(js_device, host) {
        return Err(fail("wgpu created a different device (wgpu's WebGPU backend changed; the technique needs wgpu =30.0.2)"));
    }
    match queue.as_webgpu() {
        Some(js_queue) if js_sys::Object::is(js_queue, &host_queue) => {}
        _ => return Err(fail("wgpu's queue is not the host device's queue")),
    }

    let limits = device.limits();
    let features = device.features();
    Ok(Adopted { device, queue, limits, features, adapter_info, subgroup, size_control, packed_dot })
}

impl Adopted {
    /// The adopted device as a [`Gpu`] with the browser's policy: kernels compiled for the
    /// device's one subgroup size ([`Gpu::set_web_subgroup`]; a range of sizes, even with
    /// `subgroup-size-control`, compiles without subgroups for now), and on GPUs the integer matvec
    /// form where WGSL has `dot4I8Packed` ([`Gpu::set_web_packed_dot`]). Errors are the host's:
    /// never captured here.
    pub fn into_gpu(self) -> Gpu {
        let mut gpu = Gpu::from_device(self.device, self.queue, self.adapter_info, false);
        // Not yet: a kernel with subgroup operations and a workgroup smaller than the fixed size
        // (a narrow matvec's) would be rejected; each key's workgroup must be checked first. A
        // range of sizes then compiles without subgroups, as before.
        gpu.set_web_subgroup(self.subgroup.filter(|_| !self.size_control));
        gpu.set_web_packed_dot(self.packed_dot);
        gpu
    }
}

/// Copies `len` bytes from `src[src_offset..src_offset + len]` (a JS `ArrayBuffer`, e.g. the
/// model file) straight to `buffer[buffer_offset..]` through the WebGPU queue's `writeBuffer`,
/// without passing the bytes through wasm linear memory.
///
/// WebGPU rules: `buffer_offset` and `len` must be multiples of 4 (checked here), `buffer` needs
/// `COPY_DST` usage and must not be mapped (reported asynchronously as a validation error).
/// `src_offset` may be any byte offset. Offsets are passed as f64, so ranges beyond 4 GiB work.
/// Ordering with `queue.write_buffer`/`queue.submit` through wgpu is preserved (same GPUQueue).
pub fn write_from_js(
    queue: &wgpu::Queue,
    buffer: &wgpu::Buffer,
    buffer_offset: u64,
    src: &js_sys::ArrayBuffer,
    src_offset: u64,
    len: u64,
) -> Result<(), String> {
    if (len | buffer_offset) & 3 != 0 {
        return Err(format!("write_from_js: buffer offset {buffer_offset} and length {len} must be multiples of 4"));
    }
    // Read `byteLength` as a double: js-sys's `byte_length()` is u32 and wraps above 4 GiB.
    let src_len = reflect_get(src, "byteLength").ok().and_then(|v| v.as_f64()).ok_or("write_from_js: the source is not an ArrayBuffer")? as u64;
    if src_offset.checked_add(len).is_none_or(|end| end > src_len) {
        return Err(format!("write_from_js: source range {src_offset}+{len} is outside the {src_len}-byte ArrayBuffer"));
    }
    if buffer_offset.checked_add(len).is_none_or(|end| end > buffer.size()) {
        return Err(format!("write_from_js: destination range {buffer_offset}+{len} is outside the {}-byte buffer", buffer.size()));
    }
    if len == 0 {
        return Ok(());
    }
    let js_queue = queue.as_webgpu().ok_or("write_from_js: the queue is not a WebGPU-backend queue")?;
    let js_buffer = buffer.as_webgpu().ok_or("write_from_js: the buffer is not a WebGPU-backend buffer")?;
    // For an ArrayBuffer source, dataOffset and size are in bytes.
    js_queue
        .write_buffer_with_f64_and_buffer_source_and_f64_and_f64(js_buffer, buffer_offset as f64, src, src_offset as f64, len as f64)
        .map_err(|e| format!("write_from_js: writeBuffer threw {}", js_text(&e)))
}
