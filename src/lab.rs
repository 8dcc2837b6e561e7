//! The laboratory (cargo feature `lab` only): the knobs of [`crate::knobs`] set by
//! `--set KEY=VALUE` (the CLI's `run` and `bench`) or by tests through [`crate::Gpu::lab_mut`], and the
//! measuring modes ([`Hollow`]). Neither the browser package nor the default native build
//! compiles this module: there every knob is the policy's ([`crate::policy`]).

use crate::error::{Error, Result};
use crate::ggml::GgmlType;
use crate::kernels::{CoopTile, CpuTile, Kernel, Tile};
pub use crate::knobs::{Knobs, TABLE};

/// One knob of [`TABLE`]: its key (`--set KEY=...`), its doc, and how a value sets and shows it.
pub struct Knob {
    /// The key, as the field of [`Knobs`].
    pub key: &'static str,
    /// What it overrides (the field's doc).
    pub doc: &'static str,
    /// Parses a value into the knob.
    pub set: fn(&mut Knobs, &str) -> std::result::Result<(), String>,
    /// The knob's value where it is set (a mode: where it is not off).
    pub get: fn(&Knobs) -> Option<String>,
}

impl Knobs {
    /// Applies one `KEY=VALUE` of [`TABLE`].
    ///
    /// # Errors
    /// [`Error::Input`] naming the key (unknown, or its value not parsed).
    pub fn set(&mut self, assignment: &str) -> Result<()> {
        let (key, value) = assignment.split_once('=').ok_or_else(|| Error::Input(format!("--set {assignment:?}: expected KEY=VALUE (keys: {})", keys())))?;
        let knob = TABLE.iter().find(|k| k.key == key.trim()).ok_or_else(|| Error::Input(format!("--set {key}: unknown key (keys: {})", keys())))?;
        (knob.set)(self, value.trim()).map_err(|e| Error::Input(format!("--set {key}={value}: {e}")))
    }

    /// The knobs set, as `(key, value)`.
    pub fn set_ones(&self) -> Vec<(&'static str, String)> {
        TABLE.iter().filter_map(|k| (k.get)(self).map(|v| (k.key, v))).collect()
    }
}

/// The keys of [`TABLE`], comma-separated.
fn keys() -> String {
    TABLE.iter().map(|k| k.key).collect::<Vec<_>>().join(", ")
}

/// Every key with its doc, one paragraph each (`--set help`).
pub fn help() -> String {
    TABLE.iter().map(|k| format!("{}\n    {}", k.key, k.doc.trim_end().replace('\n', "\n    "))).collect::<Vec<_>>().join("\n")
}

/// A knob's value as `--set` takes it.
pub trait Show {
    /// The text `--set` parses back to this value.
    fn show(&self) -> String;
}

/// [`Show::show`] of `v`.
pub fn show<T: Show>(v: &T) -> String {
    v.show()
}

macro_rules! show_by_display {
    ($($t:ty),*) => { $(impl Show for $t { fn show(&self) -> String { self.to_string() } })* };
}
show_by_display!(u32, u64, bool, CpuTile, CoopTile, Hollow);

impl Show for Tile {
    fn show(&self) -> String {
        format!("{}x{}/{}x{}", self.bm, self.bn, self.tm, self.tn)
    }
}

type Parsed<T> = std::result::Result<T, String>;

/// Any `u32`.
pub fn parse_u32(v: &str) -> Parsed<u32> {
    v.parse().map_err(|_| format!("{v:?}: expected a whole number"))
}

/// `true` or `false`.
pub fn parse_bool(v: &str) -> Parsed<bool> {
    v.parse().map_err(|_| format!("{v:?}: expected true or false"))
}

/// [`parse_u32`] within `ok`, else `expected`.
fn within(v: &str, ok: impl Fn(u32) -> bool, expected: &str) -> Parsed<u32> {
    parse_u32(v).ok().filter(|&n| ok(n)).ok_or_else(|| format!("{v:?}: expected {expected}"))
}

/// Key splits: at least 1.
pub fn parse_splits(v: &str) -> Parsed<u32> {
    within(v, |n| n >= 1, "1 or more")
}

/// Threads per matvec row: a power of two from 1 to 256.
pub fn parse_tpr(v: &str) -> Parsed<u32> {
    within(v, |n| n.is_power_of_two() && n <= 256, "a power of two from 1 to 256")
}

/// The output head's threads per row: a power of two from 4 to 256.
pub fn parse_head_tpr(v: &str) -> Parsed<u32> {
    within(v, |n| n.is_power_of_two() && (4..=256).contains(&n), "a power of two from 4 to 256")
}

/// Threads per row with `QOUT`: a power of two up to 64.
pub fn parse_quant_out_tpr(v: &str) -> Parsed<u32> {
    within(v, |n| n.is_power_of_two() && n <= 64, "a power of two up to 64")
}

/// A span: a multiple of 4 from 4 to 64.
pub fn parse_span(v: &str) -> Parsed<u32> {
    within(v, |n| n != 0 && n % 4 == 0 && n <= 64, "a multiple of 4 from 4 to 64")
}

/// Rows (or spans) per thread: 1 to 8.
pub fn parse_rows(v: &str) -> Parsed<u32> {
    within(v, |n| (1..=8).contains(&n), "1 to 8")
}

/// Keys a chunk of one-token attention: 64 or 128.
pub fn parse_chunk(v: &str) -> Parsed<u32> {
    within(v, |n| n == 64 || n == 128, "64 or 128")
}

/// A portable matrix-matrix tile ([`Tile`]'s `FromStr`).
pub fn parse_tile(v: &str) -> Parsed<Tile> {
    v.parse()
}

/// A CPU matrix-matrix tile ([`CpuTile`]'s `FromStr`).
pub fn parse_cpu_tile(v: &str) -> Parsed<CpuTile> {
    v.parse()
}

/// A matrix-unit matmul tile ([`CoopTile`]'s `FromStr`; [`crate::policy::check`] checks it
/// against the device at load).
pub fn parse_coop_tile(v: &str) -> Parsed<CoopTile> {
    v.parse()
}

/// GGML type names with 16-byte pieces, comma-separated, as a mask of `1 << type id`.
pub fn parse_wide_types(v: &str) -> Parsed<u64> {
    let mut mask = 0u64;
    for n in v.split(',') {
        let ty = GgmlType::from_name(n.trim()).ok_or_else(|| format!("{n}: not a GGML type name"))?;
        if crate::kernels::Format::of(ty).pieces.is_none() {
            return Err(format!("{n}: {} has no 16-byte pieces (Q4_K, Q6_K, F16 and Q8_0 do)", ty.name()));
        }
        mask |= 1 << ty as u32;
    }
    Ok(mask)
}

/// A [`Hollow`] mode.
pub fn parse_hollow(v: &str) -> Parsed<Hollow> {
    v.parse().map_err(|e: Error| e.to_string())
}

/// The step's dispatch floor (`bench --set hollow=...`): every kernel composed to return at
/// entry, so that a step keeps its dispatches, bindings, barriers, copies and CPU work while its
/// kernels move no data (the logits stay as their buffer was made: zeros). What a step costs
/// beyond the bytes it must move: the floor under any kernel's speed-up. Or one kernel alone
/// ([`Hollow::Only`]): what that kernel costs as the step runs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Hollow {
    /// The kernels run.
    #[default]
    Off,
    /// Each dispatch over the grid its plan gives (the workgroups' launch included).
    Grids,
    /// Each dispatch over one workgroup: the dispatches' and barriers' cost alone.
    One,
    /// Only this kernel's dispatches hollow, over their grids; the others run. The step's time
    /// against the same step with every kernel run is what that kernel costs as the step runs
    /// (its overlap with its neighbours included), which a profile of one pass per dispatch,
    /// whose passes each wait for the one before, cannot give.
    Only(Kernel),
}

impl Hollow {
    /// Whether `kernel` is composed to return at entry.
    pub fn hollows(self, kernel: Kernel) -> bool {
        match self {
            Hollow::Off => false,
            Hollow::Only(k) => k == kernel,
            Hollow::Grids | Hollow::One => kernel != Kernel::Stream,
        }
    }
}

impl std::fmt::Display for Hollow {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Hollow::Off => f.write_str("off"),
            Hollow::Grids => f.write_str("grids"),
            Hollow::One => f.write_str("one"),
            Hollow::Only(k) => write!(f, "only:{}", k.name()),
        }
    }
}

impl std::str::FromStr for Hollow {
    type Err = Error;
    fn from_str(s: &str) -> Result<Hollow> {
        match s {
            "off" => Ok(Hollow::Off),
            "grids" => Ok(Hollow::Grids),
            "one" => Ok(Hollow::One),
            _ => match s.strip_prefix("only:").and_then(|name| Kernel::ALL.into_iter().find(|k| k.name() == name && *k != Kernel::Stream)) {
                Some(k) => Ok(Hollow::Only(k)),
                None => Err(Error::Input(format!("hollow mode {s:?}: expected off, grids, one or only:KERNEL (a kernel's name, e.g. only:attention_decode)"))),
            },
        }
    }
}
