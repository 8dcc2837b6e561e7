// repack: regroups a buffer of Q8_0 rows of 256k weights, in place, into the layout
// formats/q8_0.wgsl reads: each row's 34-byte blocks ({ f16 d; i8 qs[32] }) in groups of 8, a
// group becoming the 8 blocks' qs (256 bytes) followed by their 8 d values (16 bytes). The same
// bytes per row, so every group (272 bytes) and every qs of a group start on 16-byte boundaries
// and the matvec can read them as 16-byte pieces. Run once, after the upload, before any kernel
// reads the buffer (repack.rs).
// A workgroup per group: it copies the group's 68 words into workgroup memory, then writes them
// back regrouped. Groups are whole 16-byte-aligned runs of the buffer, so no word is shared.
// Bindings: 0 {groups}, 1 W: the rows from byte 0. Grid: a workgroup per group, wrapping into
// workgroup_id.y past 65535 (program::grid).
struct P { groups: u32, _a: u32, _b: u32, _c: u32 };
@group(0) @binding(0) var<uniform> p: P;
@group(0) @binding(1) var<storage, read_write> W: array<u32>;
var<workgroup> g: array<u32, 68>;

// The halfword at even byte b of the group as uploaded.
fn h(b: u32) -> u32 {
  return (g[b >> 2u] >> ((b & 2u) << 3u)) & 0xffffu;
}

// The halfword at even byte o of the regrouped group: qs byte o of block o / 32 (at byte
// 34 (o / 32) + 2 + o % 32 as uploaded), or past the 256 bytes of qs, d of block (o - 256) / 2.
fn regrouped(o: u32) -> u32 {
  if (o < 256u) { return h(34u * (o >> 5u) + 2u + (o & 31u)); }
  return h(34u * ((o - 256u) >> 1u));
}

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wg: vec3u, @builtin(num_workgroups) nwg: vec3u, @builtin(local_invocation_id) l: vec3u) {
  let id = wg.y * nwg.x + wg.x;
  if (id >= p.groups) { return; }
  let w0 = 68u * id;
  for (var i = l.x; i < 68u; i += 64u) {
    g[i] = W[w0 + i];
  }
  workgroupBarrier();
  for (var i = l.x; i < 68u; i += 64u) {
    W[w0 + i] = regrouped(4u * i) | (regrouped(4u * i + 2u) << 16u);
  }
}
