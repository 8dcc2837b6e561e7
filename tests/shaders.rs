#![cfg(not(target_arch = "wasm32"))]
//! Every kernel, composed for every weight format and the geometries the engine picks, parses and
//! validates with naga (wgpu's shader compiler) and translates to SPIR-V: shader errors surface
//! here without a device, including the matrix-unit kernel (`matmul_coop`) that only devices with
//! cooperative matrices run (lavapipe has none).

use webgpu_llama::ggml::GgmlType;
use webgpu_llama::kernels::{compose, CoopTile, CpuTile, Format, Geometry, Kernel, PipelineKey, QuantOut, Tile};
use webgpu_llama::KvType;
use wgpu::naga;

/// `src` parsed and validated (panics naming `what` and the error).
fn validated(what: &str, src: &str) -> (naga::Module, naga::valid::ModuleInfo) {
    let module = naga::front::wgsl::parse_str(src).unwrap_or_else(|e| panic!("{what}: {}", e.emit_to_string(src)));
    let info = naga::valid::Validator::new(naga::valid::ValidationFlags::all(), naga::valid::Capabilities::all())
        .validate(&module)
        .unwrap_or_else(|e| panic!("{what}: {}", e.emit_to_string(src)));
    (module, info)
}

/// The bindings the entry point uses (what wgpu derives the bind group layout from).
fn used_bindings(module: &naga::Module, info: &naga::valid::ModuleInfo) -> Vec<naga::ResourceBinding> {
    let entry = info.get_entry_point(0);
    module.global_variables.iter().filter(|&(h, _)| !entry[h].is_empty()).filter_map(|(_, v)| v.binding).collect()
}

fn check(key: &PipelineKey) {
    let src = compose(key);
    let (module, info) = validated(&key.label(), &src);
    // Every function-scope `var` has an initializer: Tint (the browser's compiler) kept a
    // loop-local `var` declared without one at its last iteration's value, where WGSL and naga
    // zero it each iteration (the tiled attention's scores added up across key tiles). (By text:
    // naga's IR has no initializer either where it is a runtime value.)
    for line in src.lines().map(|l| l.split("//").next().unwrap_or("")) {
        for (i, _) in line.match_indices("var ") {
            let decl = line[i..].split(';').next().unwrap_or("");
            assert!(decl.starts_with("var<") || decl.contains('='), "{}: a `var` without an initializer: {decl}", key.label());
        }
    }
    // `bench --set hollow=...`'s form (the kernel returning at entry; `lab` builds) validates
    // too and keeps every binding, so that the bind groups made for the kernel fit it.
    let used = used_bindings(&module, &info);
    assert!(!used.is_empty(), "{}: no binding used", key.label());
    #[cfg(feature = "lab")]
    {
        let (hm, hi) = validated(&format!("{} hollow", key.label()), &webgpu_llama::kernels::hollow(&src));
        assert_eq!(used_bindings(&hm, &hi), used, "{}: the hollow form's bindings", key.label());
    }
    let opts = naga::back::spv::Options { lang_version: (1, 3), ..Default::default() };
    naga::back::spv::write_vec(&module, &info, &opts, None).unwrap_or_else(|e| panic!("{}: SPIR-V: {e}", key.label()));
    // The matrix-unit matmul's workgroup memory as the device is asked for it
    // (`CoopTile::shared_bytes`, which `policy::coop_fits` checks) against its `var<workgroup>`s:
    // equal, but for F16 pieces at split 2, which write no weight remainders.
    if let Geometry::Coop(t) = key.geometry {
        let mut layouter = naga::proc::Layouter::default();
        layouter.update(module.to_ctx()).unwrap();
        let wgsl: u32 = module.global_variables.iter().filter(|(_, v)| v.space == naga::AddressSpace::WorkGroup).map(|(_, v)| layouter[v.ty].size).sum();
        let f16_pieces = t.pieces && t.split == 2 && key.format == Some(GgmlType::F16);
        assert!(
            wgsl == t.shared_bytes() || (f16_pieces && wgsl < t.shared_bytes()),
            "{}: workgroup memory {wgsl} bytes, shared_bytes {}",
            key.label(),
            t.shared_bytes()
        );
    }
}

/// The one-token matrix-vector form writing f16 rows in pairs (`HALF_ROWS`): `tpr` threads a
/// row, `rpt` rows a thread, spans of `span` weights `un` at a time, subgroups of `sg`, 16-byte
/// pieces (`wide`), the integer form (`int`); RMSNorm fused.
fn half_rows(tpr: u32, rpt: u32, span: u32, un: u32, sg: u32, wide: bool, int: bool) -> Geometry {
    Geometry::Rows { tpr, tokens: 1, rpt, span, un, norm: true, glu: false, sg, wide, int, qout: QuantOut::Off, half: true }
}

#[test]
fn every_kernel_composes_to_valid_wgsl_and_spirv() {
    let mut n = 0;
    for kernel in Kernel::ALL {
        let geometries: Vec<Geometry> = match kernel {
            Kernel::Matvec => vec![
                // The value projection into an f16 cache (HALF_ROWS): the subgroup sums, workgroup
                // sums (WGRED), the integer form and a CPU adapter's row a thread.
                half_rows(32, 2, 16, 1, 32, true, false),
                half_rows(64, 2, 16, 1, 32, true, true),
                half_rows(16, 4, 8, 2, 0, false, false),
                half_rows(1, 8, 32, 1, 8, false, false),
                Geometry::rows(1, 1),
                Geometry::rows(16, 1),
                Geometry::rows(64, 8),
            ]
            .into_iter()
            .chain(
                // (threads a row, tokens, rows a thread, span, spans a step, RMSNorm, SwiGLU,
                // subgroup size, 16-byte pieces, integer form, integers written)
                [
                    (64, 1, 4, 32, 1, true, false, 0, false, false, QuantOut::Off),
                    (256, 1, 2, 8, 2, true, true, 0, false, false, QuantOut::Off),
                    (8, 8, 1, 12, 1, false, true, 0, false, false, QuantOut::Off),
                    (1, 8, 3, 8, 2, true, true, 0, false, false, QuantOut::Off),
                    (128, 1, 2, 16, 2, true, true, 32, false, false, QuantOut::Off),
                    (8, 8, 1, 8, 2, true, false, 32, false, false, QuantOut::Off),
                    (128, 1, 2, 16, 1, true, true, 32, true, false, QuantOut::Off),
                    (16, 8, 1, 8, 2, false, false, 0, true, false, QuantOut::Off),
                    // CPU adapters' form (MatvecForm::Broadcast; BDOT where
                    // the format has a block dot product), NT 1 and 2, subgroups of 4 and 8.
                    (1, 1, 8, 32, 1, true, true, 4, false, false, QuantOut::Off),
                    (1, 2, 4, 32, 1, false, false, 8, false, false, QuantOut::Off),
                    // The integer form (formats without it compose the f32 one).
                    (128, 1, 2, 16, 1, false, true, 32, true, true, QuantOut::Off),
                    (64, 1, 3, 16, 2, false, false, 0, true, true, QuantOut::Off),
                    // Its RMSNorm from the halves' sums of squares (INORM), and its output row
                    // written as the next op's integers (QOUT), plain and times the next norm's
                    // weights.
                    (64, 1, 2, 16, 1, true, false, 32, true, true, QuantOut::Norm),
                    (32, 1, 4, 16, 1, true, true, 0, true, true, QuantOut::Plain),
                    (64, 1, 1, 16, 1, false, false, 32, true, true, QuantOut::Norm),
                ]
                .map(|(tpr, tokens, rpt, span, un, norm, glu, sg, wide, int, qout)| Geometry::Rows {
                    tpr,
                    tokens,
                    rpt,
                    span,
                    un,
                    norm,
                    glu,
                    sg,
                    wide,
                    int,
                    qout,
                    half: false,
                }),
            )
            .collect(),
            Kernel::MatvecExp | Kernel::MoeDown => vec![Geometry::rows(1, 1), Geometry::rows(16, 1), Geometry::rows(64, 8)],
            Kernel::Matmul => vec![Geometry::Tile(Tile::PORTABLE), Geometry::Tile(Tile::LARGE)],
            // Each tile at each split, with the weights as runs and (F16, Q8_0, Q4_K, Q6_K) as pieces.
            Kernel::MatmulCoop => [0, 1, 2]
                .into_iter()
                .flat_map(|split| {
                    let wide = CoopTile { bm: 128, bn: 64, ..CoopTile::COMPACT };
                    let tall = CoopTile { bm: 32, bn: 256, ..CoopTile::COMPACT };
                    // Subgroups of 2 x 4 and 4 x 4 fragments (the default's are 4 x 2).
                    let long = CoopTile { bm: 64, bn: 128, sm: 32, sn: 64, ..CoopTile::COMPACT };
                    let square = CoopTile { bm: 128, bn: 128, sm: 64, sn: 64, ..CoopTile::COMPACT };
                    [CoopTile::DEFAULT, CoopTile::COMPACT, CoopTile::SMALL, wide, tall, long, square]
                        .into_iter()
                        .flat_map(move |t| [false, true].map(|pieces| Geometry::Coop(CoopTile { split, pieces, ..t })))
                })
                .collect(),
            Kernel::MatmulCpu => vec![
                Geometry::CpuTile(CpuTile::DEFAULT),
                Geometry::CpuTile(CpuTile { lanes: 8, rows: 3, tokens: 5, subgroup: 0 }),
                Geometry::CpuTile(CpuTile { lanes: 64, rows: 2, tokens: 16, subgroup: 8 }),
                // Subgroups of 4 (two rounds a 32-column step) and 16 (steps of 64 columns).
                Geometry::CpuTile(CpuTile { lanes: 64, rows: 3, tokens: 16, subgroup: 4 }),
                Geometry::CpuTile(CpuTile { lanes: 32, rows: 2, tokens: 8, subgroup: 16 }),
            ],
            Kernel::AttentionCpu => [false, true]
                .into_iter()
                .flat_map(|kv_f16| {
                    [
                        Geometry::CpuAttention { head_dim: 64, lanes: 32, rows: 1, keys: 4, subgroup: 0, kv_f16 },
                        Geometry::CpuAttention { head_dim: 20, lanes: 8, rows: 3, keys: 3, subgroup: 0, kv_f16 },
                        Geometry::CpuAttention { head_dim: 64, lanes: 32, rows: 2, keys: 8, subgroup: 8, kv_f16 },
                        // The shipped ones with subgroups of 8 (8 x 8 and, past 64 dims, 16 x 4).
                        webgpu_llama::attention::cpu_geometry(64, 8, if kv_f16 { KvType::F16 } else { KvType::F32 }),
                        webgpu_llama::attention::cpu_geometry(128, 8, if kv_f16 { KvType::F16 } else { KvType::F32 }),
                        // The one-token ones: SwiftShader's subgroups of 4, and none.
                        webgpu_llama::attention::cpu_one_token_geometry(64, 4, if kv_f16 { KvType::F16 } else { KvType::F32 }),
                        webgpu_llama::attention::cpu_one_token_geometry(128, 0, if kv_f16 { KvType::F16 } else { KvType::F32 }),
                    ]
                })
                .collect(),
            // (head dim, GQA group, heads a workgroup, f16 cache, RoPE fused, subgroup size,
            // value cached, splits merged, integers written, keys a chunk)
            Kernel::AttentionDecode => [
                (64, 4, 2, false, false, 0, false, false, false, 64),
                (132, 3, 3, true, true, 0, false, true, false, 64),
                (132, 3, 3, true, true, 0, false, true, false, 128),
                (20, 1, 1, false, true, 32, true, false, false, 64),
                (260, 2, 2, true, false, 8, false, false, false, 64),
                (600, 2, 2, false, true, 32, false, true, false, 128),
                (128, 4, 4, false, true, 32, true, true, true, 64),
                (128, 4, 2, false, true, 32, true, true, true, 128),
                (128, 4, 4, false, true, 32, false, false, false, 64),
                (64, 8, 1, true, true, 8, false, true, true, 64),
                (64, 4, 2, false, true, 0, false, true, true, 128),
                // The f16 cache with the value projection's rows in it, one head a workgroup.
                (64, 4, 1, true, true, 32, true, true, true, 64),
            ]
            .into_iter()
            .map(|(head_dim, group, heads, kv_f16, rope, sg, v_cached, combine, quant, keys)| {
                let tickets = if combine { 1 << 20 } else { 0 };
                Geometry::AttentionDecode {
                    head_dim,
                    group,
                    heads,
                    kv_f16,
                    rope,
                    sg,
                    v_cached,
                    combine,
                    quant,
                    tickets,
                    keys,
                    prefetch: head_dim % 3 != 0,
                    owned: false,
                }
            })
            .collect(),
            // The spread form (RoPE and the merge fused in): (head dim, GQA group, heads a
            // workgroup, f16 cache, subgroup size, value cached, integers written)
            Kernel::AttentionDecodeWide => [
                (128, 4, 2, false, 32, true, true),
                (128, 4, 4, true, 32, false, true),
                (64, 4, 2, false, 32, true, true),
                (32, 4, 2, true, 8, false, false),
                (512, 2, 2, false, 64, true, false),
                (128, 4, 2, true, 32, true, true),
            ]
            .into_iter()
            .flat_map(|c| [(c, 64), (c, 128)])
            .filter(|&((head_dim, ..), keys)| head_dim * keys / 32 <= 1024)
            .map(|((head_dim, group, heads, kv_f16, sg, v_cached, quant), keys)| Geometry::AttentionDecode {
                head_dim,
                group,
                heads,
                kv_f16,
                rope: true,
                sg,
                v_cached,
                combine: true,
                quant,
                tickets: 1 << 20,
                keys,
                prefetch: false,
                // (Both of the kernel's forms are in every variant's WGSL: `owned` changes its
                // constant OWNED, and the label.)
                owned: head_dim / 4 <= sg && keys == 64,
            })
            .collect(),
            Kernel::Attention => [false, true]
                .into_iter()
                .flat_map(|kv_f16| {
                    [Geometry::Attention { head_dim: 64, tpq: 16, bkv: 16, kv_f16 }, Geometry::Attention { head_dim: 8, tpq: 4, bkv: 32, kv_f16 }]
                })
                .collect(),
            Kernel::AttentionTiled => [false, true]
                .into_iter()
                .flat_map(|kv_f16| {
                    [
                        Geometry::AttentionTiled { head_dim: 128, bkv: 32, kv_f16 },
                        Geometry::AttentionTiled { head_dim: 20, bkv: 8, kv_f16 },
                        Geometry::AttentionTiled { head_dim: 132, bkv: 16, kv_f16 },
                        Geometry::AttentionTiled { head_dim: 18, bkv: 32, kv_f16 },
                    ]
                })
                .collect(),
            Kernel::AttentionCombine | Kernel::AttentionCombineWide => vec![Geometry::Combine { quant: false }, Geometry::Combine { quant: true }],
            Kernel::RopeKv => vec![Geometry::RopeKv { kv_f16: false }, Geometry::RopeKv { kv_f16: true }],
            Kernel::RmsNorm => vec![Geometry::NormRows { rows: 0 }, Geometry::NormRows { rows: 64 }, Geometry::NormRows { rows: 5 }],
            _ => vec![Geometry::Fixed],
        };
        for &geometry in &geometries {
            if !kernel.reads_weights() {
                check(&PipelineKey::new(kernel, geometry));
                n += 1;
                continue;
            }
            // Each format in each of its rows' layouts (the file's; Q8_0 regrouped in pairs
            // and in eights, Q6_K in eights: webgpu_llama::repack::group_blocks).
            for ty in GgmlType::ALL {
                let mut keys: Vec<PipelineKey> = [96, 64, 2048].map(|cols| PipelineKey::weights(kernel, ty, cols, geometry)).into();
                keys.dedup_by_key(|k| k.regroup);
                for key in keys {
                    check(&key);
                    n += 1;
                }
            }
        }
    }
    println!("{n} kernel variants valid");
}

/// The `coop_tile` knob's syntax: the subgroup block is optional (32 x 32), 32 or 64 a side, and must
/// tile the workgroup's block within 8 subgroups.
#[test]
fn coop_tiles_parse_with_and_without_a_subgroup_block() {
    let t: CoopTile = "64x128/2".parse().unwrap();
    assert_eq!((t.bm, t.bn, t.sm, t.sn, t.split), (64, 128, 32, 32, 2));
    assert_eq!(t.threads(), 256);
    let t: CoopTile = "128x128/1/64x32".parse().unwrap();
    assert_eq!((t.bm, t.bn, t.sm, t.sn, t.split), (128, 128, 64, 32, 1));
    assert_eq!(t.threads(), 256);
    assert_eq!(t.shared_bytes(), (128 + 128 + 128) * 80 + 8 * 1024);
    let t: CoopTile = "128x128/2/64x64".parse().unwrap();
    assert_eq!(t.threads(), 128);
    // Labels round-trip.
    for s in ["64x128/2", "128x128/2/64x32", "32x256/0/32x64"] {
        assert_eq!(s.parse::<CoopTile>().unwrap().to_string(), s);
    }
    for bad in ["128x128/2", "64x128/2/16x32", "96x128/2/64x32", "64x128/3", "64x128", "64x128/2/32x32/1", "axb/2", "4294967264x4294967264/2", "1024x32/2"] {
        let e = bad.parse::<CoopTile>().unwrap_err();
        assert!(e.contains(bad), "{bad}: {e}");
    }
}

/// The CPU attention kernel broadcasts each key from the lane that loaded it: its subgroups must
/// tile the workgroup and its key blocks be a subgroup wide, for every subgroup size a device can
/// report (lavapipe's are 4, 8 or 16 with `LP_NATIVE_VECTOR_WIDTH` 128, 256 or 512).
#[test]
fn cpu_attention_subgroups_tile_the_workgroup() {
    for sg in [0, 1, 2, 4, 8, 16, 32, 64] {
        for head_dim in [20, 64, 128, 260] {
            // The one-token form: a lane per row, a subgroup's lanes or 4 without.
            match webgpu_llama::attention::cpu_one_token_geometry(head_dim, sg, KvType::F32) {
                Geometry::CpuAttention { lanes, rows: 1, keys, subgroup, .. } if subgroup > 0 => {
                    assert_eq!((subgroup, keys, lanes), (sg, sg, sg), "one-token hd {head_dim} sg {sg}")
                }
                Geometry::CpuAttention { lanes: 4, rows: 1, keys: 4, subgroup: 0, .. } => {
                    assert!(!(4..=16).contains(&sg) || 16 % sg != 0, "one-token hd {head_dim}: subgroups of {sg} unused")
                }
                g => panic!("one-token: {g:?}"),
            }
            match webgpu_llama::attention::cpu_geometry(head_dim, sg, KvType::F32) {
                Geometry::CpuAttention { lanes, keys, subgroup, .. } if subgroup > 0 => {
                    assert_eq!((subgroup, keys), (sg, sg), "hd {head_dim} sg {sg}");
                    assert_eq!(lanes % subgroup, 0, "hd {head_dim} sg {sg}: {lanes} lanes");
                }
                Geometry::CpuAttention { subgroup: 0, .. } => assert!(sg == 0 || 16 % sg != 0, "hd {head_dim}: subgroups of {sg} unused"),
                g => panic!("{g:?}"),
            }
        }
    }
}

/// The files under `shaders/` declare their resources by name only (`@bind`: the composer
/// numbers them, and the bind groups are made from the names), and the structs that several
/// kernels share once (`shaders/step.wgsl`, `shaders/attention_params.wgsl`).
#[test]
fn shader_files_declare_bindings_by_name_and_shared_structs_once() {
    let mut files: Vec<std::path::PathBuf> = Vec::new();
    for dir in ["shaders", "shaders/formats"] {
        files.extend(std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().path()).filter(|p| p.extension().is_some_and(|x| x == "wgsl")));
    }
    let mut steps = 0;
    for f in &files {
        let src = std::fs::read_to_string(f).unwrap();
        assert!(!src.contains("@binding("), "{}: a binding number", f.display());
        steps += src.matches("struct Step {").count();
        if !f.ends_with("attention_params.wgsl") {
            assert!(!src.contains("struct Attn {"), "{}: declares attention's uniform again", f.display());
        }
    }
    assert_eq!(steps, 1, "struct Step declared once");
}

/// `kernels::FORMATS` says which optional forms each format file defines (the composer reads
/// the table, never the files): its pieces (`//@pieces`), the integer form (`pint`), its own
/// `dq4a` and `bdot` before the pieces; and the files leave the table's constants to it.
#[test]
fn the_format_table_matches_the_format_files() {
    for ty in GgmlType::ALL {
        let f = Format::of(ty);
        assert_eq!(f.ty, ty);
        let name = ty.name();
        assert_eq!(f.pieces.is_some(), f.source.contains("\n//@pieces\n"), "{name}: pieces");
        assert_eq!(f.int, f.source.contains("\nfn pint("), "{name}: the integer form");
        assert_eq!(f.dq4a, f.base().contains("\nfn dq4a("), "{name}: dq4a");
        assert_eq!(f.bdot, f.base().contains("\nfn bdot("), "{name}: bdot");
        for c in ["BLOCK_ELEMS", "BLOCK_BYTES", "GROUP", "CHUNK", "PIECE", "RUNS"] {
            assert!(!f.source.contains(&format!("const {c}:")), "{name}: declares {c}, the table's");
        }
    }
}
