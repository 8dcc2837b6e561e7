//! WGSL from a [`PipelineKey`]: the shared prologues, the geometry's constants, the format's
//! file, the kernel's file(s), the `//@if` / `//@for` blocks expanded and the bindings numbered.

use super::*;

/// A kernel's composed WGSL and its bindings by name: binding `i` of group 0 is `bindings[i]`.
pub struct Composed {
    /// The WGSL.
    pub wgsl: String,
    /// The names of the bindings it declares, in binding order.
    pub bindings: Vec<String>,
}

/// The WGSL of `key`.
pub fn compose(key: &PipelineKey) -> String {
    composed(key).wgsl
}

/// The WGSL of `key` and its bindings' names.
pub fn composed(key: &PipelineKey) -> Composed {
    number_bindings(&compose_inner(key))
}

/// Numbers the composed kernel's resources: each `@bind var<..> NAME: T;` line (the form the
/// files under `shaders/` declare them in, by name only) becomes `@group(0) @binding(i) var..`,
/// `i` counting the declarations that the `//@if` blocks kept, in order; `@bind(OTHER) var..`
/// declares a second view of binding `OTHER` (declared before it). The bind group is made from
/// the names ([`crate::pipelines::Kernels::bind`]), so no binding number is written anywhere but here.
fn number_bindings(src: &str) -> Composed {
    let mut bindings: Vec<String> = Vec::new();
    let mut wgsl = String::with_capacity(src.len() + 64);
    for line in src.lines() {
        if let Some(rest) = line.strip_prefix("@bind") {
            let (alias, decl) = match rest.strip_prefix('(') {
                Some(r) => {
                    let (name, decl) = r.split_once(')').unwrap_or_else(|| panic!("bad @bind: {line}"));
                    (Some(name), decl)
                }
                None => (None, rest),
            };
            let decl = decl.trim_start();
            // `var<space> NAME: T;` or `var NAME: T;`
            let after_var = decl.strip_prefix("var").unwrap_or_else(|| panic!("@bind without var: {line}"));
            let after_space = after_var.find('>').map_or(after_var, |i| &after_var[i + 1..]);
            let name = after_space.split(':').next().unwrap_or_default().trim();
            let i = match alias {
                Some(other) => bindings.iter().position(|b| b == other).unwrap_or_else(|| panic!("{line}: {other} is not declared before")),
                None => {
                    assert!(!bindings.iter().any(|b| b == name), "{name} declared twice");
                    bindings.push(name.to_string());
                    bindings.len() - 1
                }
            };
            wgsl += &format!("@group(0) @binding({i}) {decl}\n");
        } else {
            wgsl += line;
            wgsl.push('\n');
        }
    }
    Composed { wgsl, bindings }
}

fn compose_inner(key: &PipelineKey) -> String {
    // Enable directives must come first.
    // (Naga takes subgroup built-ins without `enable subgroups;`, and rejects it so far: the
    // browser, which requires it, gets it from `Gpu::wgsl_source`.)
    let enables = match key.kernel {
        Kernel::MatmulCoop => "enable f16;\nenable wgpu_cooperative_matrix;\n",
        Kernel::Split => "enable f16;\n",
        _ => "",
    };
    let mut s = format!("{enables}// composed by kernels::compose: {}\n", key.label());
    // The structs that several kernels share, declared once.
    if key.kernel.reads_step() {
        s += include_str!("../../shaders/step.wgsl");
    }
    if key.kernel.is_attention() {
        s += include_str!("../../shaders/attention_params.wgsl");
    }
    if key.kernel.gates() {
        s += include_str!("../../shaders/activation.wgsl");
    }
    if key.kernel.reads_kv_cache() {
        s += &unroll(include_str!("../../shaders/kv_cache.wgsl"), &consts(key));
    }
    match key.geometry {
        Geometry::Fixed => {}
        Geometry::Rows { tpr, tokens, rpt, span, un, glu, sg, qout, .. } => {
            let ng = span / 4;
            // (The expert kernels' workgroups are 64 threads, whatever the rows take.)
            let wg = if key.kernel == Kernel::Matvec { matvec_workgroup(tpr, rpt, sg, qout) } else { tpr.max(64) };
            let c = consts(key);
            let norm = c.iter().find(|(n, _)| *n == "NORM").map_or(0, |c| c.1);
            s += &format!(
                "const WG: u32 = {wg}u;\nconst TPR: u32 = {tpr}u;\nconst RPW: u32 = {}u;\nconst RPT: u32 = {rpt}u;\nconst NT: u32 = {tokens}u;\n",
                wg / tpr
            );
            s += &format!(
                "const SPAN: u32 = {span}u;\nconst NG: u32 = {ng}u;\nconst UN: u32 = {un}u;\nconst NORM: u32 = {norm}u;\nconst GLU: u32 = {}u;\nconst SG: u32 = {sg}u;\nconst LANES: u32 = {}u;\n",
                glu as u32,
                matvec_lanes(tpr, sg)
            );
        }
        Geometry::Tile(t) => s += &format!("const BM: u32 = {}u;\nconst BN: u32 = {}u;\nconst TM: u32 = {}u;\nconst TN: u32 = {}u;\n", t.bm, t.bn, t.tm, t.tn),
        Geometry::Coop(t) => {
            let (fm, fn_) = (t.sm / 16, t.sn / 16);
            s += &format!("const BM: u32 = {}u;\nconst BN: u32 = {}u;\nconst FM: u32 = {fm}u;\nconst FN: u32 = {fn_}u;\n", t.bm, t.bn);
            s += &format!("const SGM: u32 = {}u;\nconst SGN: u32 = {}u;\n", t.bm / t.sm, t.bn / t.sn);
            s += &format!("const SPLIT: u32 = {}u;\n", t.split);
        }
        Geometry::Attention { head_dim, tpq, bkv, .. } => s += &format!("const HD: u32 = {head_dim}u;\nconst TPQ: u32 = {tpq}u;\nconst BKV: u32 = {bkv}u;\n"),
        Geometry::AttentionTiled { head_dim, bkv, .. } => {
            s += &format!("const HD: u32 = {head_dim}u;\nconst HD4: u32 = {}u;\nconst BKV: u32 = {bkv}u;\n", head_dim.div_ceil(4))
        }
        Geometry::AttentionDecode { head_dim, group, heads, sg, tickets, keys, owned, .. } => {
            // Key groups: the largest power of two of NDG-thread groups that fits KC threads, so
            // that its groups of KC / KG keys cover the KC keys of a chunk exactly.
            let groups = (keys / (head_dim / 4).max(1)).max(1);
            let kg = 1u32 << (31 - groups.leading_zeros());
            s += &format!(
                "const HD: u32 = {head_dim}u;\nconst GQ: u32 = {group}u;\nconst G: u32 = {heads}u;\nconst DPT: u32 = {}u;\nconst KG: u32 = {kg}u;\nconst SG: u32 = {sg}u;\nconst KC: u32 = {keys}u;\n",
                head_dim.div_ceil(4 * keys)
            );
            // Threads a workgroup: a key each, or 8 vectors of a chunk's keys and values each.
            let threads = if key.kernel == Kernel::AttentionDecodeWide { wide_threads(head_dim, keys) } else { keys };
            s += &format!("const WGT: u32 = {threads}u;\nconst MG: u32 = {}u;\nconst OWNED: bool = {owned};\n", merge_groups(key));
            // The merge's layout (COMBINE): a head group's split in whole 128-byte lines.
            let gs = (heads * (head_dim + 2)).next_multiple_of(32);
            s += &format!("const GS: u32 = {gs}u;\nconst MAX_SPLITS: u32 = {}u;\nconst TICKETS: u32 = {}u;\n", MAX_SPLITS, tickets.max(1));
        }
        Geometry::CpuTile(_) | Geometry::CpuAttention { .. } | Geometry::RopeKv { .. } | Geometry::NormRows { .. } | Geometry::Combine { .. } => {
            for (name, v) in consts(key) {
                s += &format!("const {name}: u32 = {v}u;\n");
            }
        }
    }
    // `//@if` blocks in the shared files too (XH: the activations as f16 halves, matmul_coop).
    // (HALF_ROWS: linear.wgsl's f16 rows for matvec.wgsl; both off where the key has neither.)
    let mut shared = consts(key);
    for name in ["HALF_ROWS", "XH"] {
        if !shared.iter().any(|c| c.0 == name) {
            shared.push((name, 0));
        }
    }
    // DQ4A: the format defines its own `dq4a` (formats/common.wgsl composes the general one).
    shared.push(("DQ4A", key.format.is_some_and(|ty| Format::of(ty).dq4a) as u32));
    if let Some(ty) = key.format.filter(|_| key.kernel.reads_weights()) {
        // The rows' layout (formats/q8_0.wgsl, q6_k.wgsl): blocks per regrouped group, or 0.
        s += &format!("const REGROUP: u32 = {}u;\n", key.regroup);
        // The format's 16-byte pieces only where they are read: they use the `W4` view that
        // the matrix-vector kernel's WIDE form declares (matmul_coop reads its pieces itself).
        let (f, wide) = (Format::of(ty), matches!(key.geometry, Geometry::Rows { wide: true, .. }) && key.kernel == Kernel::Matvec);
        s += &f.consts(wide);
        s += &unroll(include_str!("../../shaders/formats/common.wgsl"), &shared);
        s += "\n";
        s += if wide { f.source } else { f.base() };
        s += "\n";
    }
    // The writers of the integer form's activations share their maths.
    let qout = consts(key).contains(&("QOUT", 1));
    let quant = matches!(key.geometry, Geometry::Combine { .. } | Geometry::AttentionDecode { .. }) && consts(key).contains(&("QUANT", 1));
    if key.kernel == Kernel::Quantize || quant || qout {
        s += include_str!("../../shaders/quantize_half.wgsl");
        s += "\n";
    }
    if matches!(key.kernel, Kernel::AttentionCombine | Kernel::AttentionCombineWide) {
        s += &unroll(include_str!("../../shaders/combine_io.wgsl"), &consts(key));
        s += "\n";
    }
    if matches!(key.kernel, Kernel::AttentionDecode | Kernel::AttentionDecodeWide) {
        s += &unroll(include_str!("../../shaders/attention_decode_io.wgsl"), &consts(key));
        s += "\n";
    }
    if matches!(key.kernel, Kernel::Penalty | Kernel::Pick | Kernel::PickGreedy) {
        s += include_str!("../../shaders/gen.wgsl");
        s += "\n";
    }
    if matches!(key.kernel, Kernel::MatmulCoop | Kernel::Split) {
        s += include_str!("../../shaders/hi16.wgsl");
        s += "\n";
    }
    if matches!(key.kernel, Kernel::Matvec | Kernel::Matmul | Kernel::MatmulCoop | Kernel::MatmulCpu) {
        s += &unroll(include_str!("../../shaders/linear.wgsl"), &shared);
        s += "\n";
    }
    // The matrix-vector kernel: the shared file, then its form's, the fragments that the
    // forms' entry points share put in place of their `//@include` lines.
    let source = match key.kernel {
        Kernel::Matvec => {
            let form = MatvecForm::of(key).source().lines().map(|line| match line.strip_prefix("//@include ") {
                Some(name) => FRAGMENTS.iter().find(|f| f.0 == name.trim()).unwrap_or_else(|| panic!("{line}: no such fragment")).1.to_string(),
                None => format!("{line}\n"),
            });
            format!("{}\n{}", key.kernel.source(), form.collect::<String>())
        }
        _ => key.kernel.source().to_string(),
    };
    s + &unroll(&source, &consts(key))
}

/// The compile-time constants of `key`'s geometry, by name (the bounds of `//@for` blocks).
fn consts(key: &PipelineKey) -> Vec<(&'static str, u32)> {
    match key.geometry {
        // KR: subgroup rounds per step of matmul_cpu.wgsl, whose steps are whole 32-column blocks.
        Geometry::CpuTile(t) => {
            let kr = (8 / t.subgroup.max(1)).max(1);
            debug_assert!(t.subgroup == 0 || (4 * t.subgroup * kr) % 32 == 0, "subgroup sizes are powers of two");
            vec![("WG", t.lanes), ("RPI", t.rows), ("NT", t.tokens), ("SG", t.subgroup), ("KR", kr)]
        }
        Geometry::Rows { .. } => matvec::consts(key),
        Geometry::CpuAttention { head_dim, lanes, rows, keys, subgroup, kv_f16 } => {
            vec![("HD4", head_dim / 4), ("WG", lanes), ("RQ", rows), ("BK", keys), ("SG", subgroup), ("KV16", kv_f16 as u32)]
        }
        // `//@if KV16` blocks: the f16 cache's bindings, reads and writes.
        Geometry::AttentionDecode { .. } => attention::decode_consts(key),
        Geometry::AttentionTiled { head_dim, kv_f16, .. } => vec![("KV16", kv_f16 as u32), ("Q4", (head_dim % 4 == 0) as u32)],
        Geometry::Attention { kv_f16, .. } | Geometry::RopeKv { kv_f16 } => vec![("KV16", kv_f16 as u32)],
        Geometry::NormRows { rows } => vec![("ROWS", rows)],
        Geometry::Combine { quant } => vec![("QUANT", quant as u32)],
        Geometry::Coop(t) => matmul::coop_consts(key, t),
        _ => vec![],
    }
}

/// Expands the `//@for v < N` .. `//@end` blocks of a kernel's WGSL (nested ones too): the lines
/// between them repeated for v = 0 .. N - 1 with `$v` replaced by the number; and the
/// `//@if N` (`//@if !N`) .. `//@end` blocks: kept where N is not 0 (is 0). N is a literal or
/// a name of `consts`. WGSL has no way to unroll a loop or to name a register per index, and
/// the CPU implementations' compilers keep unrolled scalars in registers where a private array
/// indexed in a loop would live in memory.
pub fn unroll(src: &str, consts: &[(&str, u32)]) -> String {
    let lines: Vec<&str> = src.lines().collect();
    let mut out = String::with_capacity(src.len());
    expand(&lines, &[], consts, &mut out);
    out
}

fn expand(lines: &[&str], vars: &[(String, u32)], consts: &[(&str, u32)], out: &mut String) {
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i];
        let t = line.trim();
        if t.starts_with("//@for ") || t.starts_with("//@if ") {
            let value = |name: &str| -> u32 {
                name.parse().ok().or_else(|| consts.iter().find(|c| c.0 == name).map(|c| c.1)).unwrap_or_else(|| panic!("{line}: {name} is not a constant"))
            };
            let (var, n) = if let Some(head) = t.strip_prefix("//@for ") {
                let (var, bound) = head.split_once('<').unwrap_or_else(|| panic!("bad //@for: {line}"));
                (Some(var.trim()), value(bound.trim()))
            } else {
                let cond = t["//@if ".len()..].trim();
                match cond.strip_prefix('!') {
                    Some(c) => (None, (value(c.trim()) == 0) as u32),
                    None => (None, (value(cond) != 0) as u32),
                }
            };
            // The matching //@end.
            let mut depth = 1;
            let mut j = i + 1;
            while depth > 0 {
                let t = lines.get(j).unwrap_or_else(|| panic!("{line} without //@end")).trim();
                depth += (t.starts_with("//@for ") || t.starts_with("//@if ")) as i32 - (t == "//@end") as i32;
                j += 1;
            }
            for v in 0..n {
                let mut vars = vars.to_vec();
                vars.extend(var.map(|var| (format!("${var}"), v)));
                expand(&lines[i + 1..j - 1], &vars, consts, out);
            }
            i = j;
            continue;
        }
        let mut l = line.to_string();
        // Longest names first, so that `$ij` is not taken for `$i` followed by `j`.
        let mut vs = vars.to_vec();
        vs.sort_by_key(|v| std::cmp::Reverse(v.0.len()));
        for (name, v) in &vs {
            l = l.replace(name.as_str(), &v.to_string());
        }
        out.push_str(&l);
        out.push('\n');
        i += 1;
    }
}

/// `src` (a composed kernel) returning at the entry of `main` ([`crate::lab::Hollow`]; `lab`
/// builds only; every kernel but `stream.wgsl`, which measures the device): the rest stays in the module, so that
/// the bindings it declares are still in the derived layout (`tests/shaders.rs` checks both for
/// every variant). (A constant condition: the barriers after it stay in uniform control flow.)
#[cfg(feature = "lab")]
pub fn hollow(src: &str) -> String {
    let entry = src.find("\nfn main(").expect("a composed kernel has a main");
    assert_eq!(src.rfind("\nfn main("), Some(entry), "a composed kernel has one main");
    let open = entry + src[entry..].find('{').expect("main has a body") + 1;
    format!("{}\n  if (true) {{ return; }}{}", &src[..open], &src[open..])
}
