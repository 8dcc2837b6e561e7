//! A kernel's bindings by name: the bind group entries of (name, buffer) pairs.

/// A buffer for the binding a kernel declares by this name (`@bind var<..> NAME`, see
/// [`super::Composed::bindings`]).
pub type Named<'a> = (&'static str, &'a wgpu::Buffer);

/// The bind group entries of `buffers` for a kernel whose bindings are `bindings`: each
/// declared name's buffer at its binding. A buffer whose name the kernel does not declare is
/// left out (one list serves an op's forms: the span form of a matrix-vector kernel declares no
/// `W4`), as is a declared name without a buffer (declared for a helper that the entry point
/// never calls; one it reads fails the bind group's validation).
pub fn bound<'a>(bindings: &[String], buffers: &[Named<'a>]) -> Vec<(u32, &'a wgpu::Buffer)> {
    debug_assert!(buffers.iter().enumerate().all(|(i, b)| buffers[..i].iter().all(|a| a.0 != b.0)), "a name given twice");
    bindings.iter().enumerate().filter_map(|(i, name)| buffers.iter().find(|b| b.0 == name).map(|b| (i as u32, b.1))).collect()
}
