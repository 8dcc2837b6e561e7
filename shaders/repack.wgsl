// repack: regroups a buffer of Q8_0 or Q6_K rows, in place, into the layout formats/q8_0.wgsl
// and formats/q6_k.wgsl read: each row's blocks in groups of 8, the 8 blocks' bytes without
// their f16 d, then the 8 d values (16 bytes).
// - Q8_0 (KIND 0; { f16 d; i8 qs[32] }, 34 bytes; rows of 256k weights): a group is the 8 qs
//   (256 bytes) then the d values: 272 bytes, 68 words.
// - Q6_K (KIND 1; { ql[128]; qh[64]; i8 scales[16]; f16 d }, 210 bytes; rows of 2048k weights):
//   a group is the 8 blocks' first 208 bytes (13 vec4s each) then the d values: 1680 bytes, 420
//   words.
// The same bytes per row, so every group and every block's bytes start on 16-byte boundaries and
// the matvec can read them as 16-byte pieces. Run once, after the upload, before any kernel
// reads the buffer (repack.rs).
// A workgroup per group: it copies the group's words into workgroup memory, then writes them
// back regrouped. Groups are whole 16-byte-aligned runs of the buffer, so no word is shared.
// Bindings: 0 {groups, kind}, 1 W: the rows from byte 0. Grid: a workgroup per group, wrapping
// into workgroup_id.y past 65535 (program::grid).
struct P { groups: u32, kind: u32, _b: u32, _c: u32 };
@group(0) @binding(0) var<uniform> p: P;
@group(0) @binding(1) var<storage, read_write> W: array<u32>;
var<workgroup> g: array<u32, 420>;

// The halfword at even byte b of the group as uploaded.
fn h(b: u32) -> u32 {
  return (g[b >> 2u] >> ((b & 2u) << 3u)) & 0xffffu;
}

// The halfword at even byte o of the regrouped group: byte o % Q of block o / Q's bytes without
// d (Q = 32 or 208: d comes first in a Q8_0 block, last in a Q6_K one), or past the 8 blocks'
// (8 Q bytes), d of block (o - 8 Q) / 2.
fn regrouped(o: u32) -> u32 {
  let bb = select(34u, 210u, p.kind == 1u);
  let q = bb - 2u;
  let skip = select(2u, 0u, p.kind == 1u);
  if (o < 8u * q) { return h(bb * (o / q) + skip + o % q); }
  return h(bb * ((o - 8u * q) >> 1u) + select(0u, q, p.kind == 1u));
}

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wg: vec3u, @builtin(num_workgroups) nwg: vec3u, @builtin(local_invocation_id) l: vec3u) {
  let id = wg.y * nwg.x + wg.x;
  if (id >= p.groups) { return; }
  let words = select(68u, 420u, p.kind == 1u);
  let w0 = words * id;
  for (var i = l.x; i < words; i += 64u) {
    g[i] = W[w0 + i];
  }
  workgroupBarrier();
  for (var i = l.x; i < words; i += 64u) {
    W[w0 + i] = regrouped(4u * i) | (regrouped(4u * i + 2u) << 16u);
  }
}
