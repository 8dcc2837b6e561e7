#![cfg(not(target_arch = "wasm32"))]
//! The device policy in `src/gpu.rs` that needs no kernel run: the subgroup size the browser's
//! kernels are compiled for, and the WGSL a device with `subgroup-size-control` compiles.

mod common;

use webgpu_llama::ggml::GgmlType;
use webgpu_llama::gpu::subgroup_for;
use webgpu_llama::kernels::{compose, Geometry, Kernel, PipelineKey, QuantOut};

#[test]
fn the_subgroup_size_is_the_fixed_one_or_a_controlled_pick_in_the_range() {
    // One size: taken as it is, where 4 to 64 and a power of two.
    assert_eq!(subgroup_for(32, 32, false), Some((32, false)));
    assert_eq!(subgroup_for(4, 4, true), Some((4, false)));
    assert_eq!(subgroup_for(2, 2, false), None);
    assert_eq!(subgroup_for(128, 128, true), None);
    // A range: only with size control; 32 where the range holds it, else its largest size to 64.
    assert_eq!(subgroup_for(8, 32, false), None);
    assert_eq!(subgroup_for(8, 32, true), Some((32, true)));
    assert_eq!(subgroup_for(4, 128, true), Some((32, true)));
    assert_eq!(subgroup_for(4, 16, true), Some((16, true)));
    assert_eq!(subgroup_for(4, 24, true), Some((16, true)));
    assert_eq!(subgroup_for(64, 128, true), Some((64, true)));
    assert_eq!(subgroup_for(1, 2, true), None);
    assert_eq!(subgroup_for(32, 8, true), None);
}

#[test]
fn size_control_fixes_the_size_of_kernels_with_subgroup_operations_only() {
    let mut gpu = common::gpu(false);
    gpu.set_web_subgroup(Some(16));
    assert_eq!(gpu.reduce_subgroup(), 16);
    gpu.set_web_size_control(true);
    // The top-k kernel has no subgroup operations; a GPU's matrix-vector rows summed by subgroup
    // shuffles have.
    let topk = gpu.wgsl_source(compose(&PipelineKey::plain(Kernel::TopK)));
    assert!(topk.starts_with("enable subgroups;") && !topk.contains("@subgroup_size") && !topk.contains("subgroup_size_control"), "{}", &topk[..200]);
    let geometry = Geometry::Rows {
        tpr: 64,
        tokens: 1,
        rpt: 2,
        span: 16,
        un: 1,
        norm: true,
        glu: false,
        sg: 16,
        wide: false,
        int: false,
        qout: QuantOut::Off,
        half: false,
    };
    let key = PipelineKey { kernel: Kernel::Matvec, format: Some(GgmlType::Q8_0), regroup: 0, geometry };
    let matvec = gpu.wgsl_source(compose(&key));
    assert!(matvec.contains("enable subgroup_size_control;") && matvec.contains("@subgroup_size(16) @compute"), "{}", key.label());
    assert_eq!(matvec.matches("@compute").count(), 1);
    // Without size control (a fixed-size device): the directives only.
    gpu.set_web_size_control(false);
    assert!(!gpu.wgsl_source(compose(&key)).contains("@subgroup_size"));
}
