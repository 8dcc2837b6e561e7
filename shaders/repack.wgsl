// repack: regroups a buffer of Q8_0 or Q6_K rows, in place, into the layout formats/q8_0.wgsl
// and formats/q6_k.wgsl read: each row's blocks in groups of G (8, or 2: repack.rs
// group_blocks), the G blocks' bytes without their f16 d, then the G d values.
// - Q8_0 (KIND 0; { f16 d; i8 qs[32] }, 34 bytes): in rows of 256k weights a group is 8 qs
//   (256 bytes) then the d values: 272 bytes, 68 words; in other rows of 64k, 2 qs then 2 d
//   values: 68 bytes, 17 words (every qs word aligned, not every group 16-byte aligned).
// - Q6_K (KIND 1; { ql[128]; qh[64]; i8 scales[16]; f16 d }, 210 bytes; rows of 2048k weights):
//   a group is the 8 blocks' first 208 bytes (13 vec4s each) then the d values: 1680 bytes, 420
//   words.
// The same bytes per row, so with G = 8 every group and every block's bytes start on 16-byte
// boundaries and the matvec can read them as 16-byte pieces. Run once, after the upload, before
// any kernel reads the buffer (repack.rs).
// A workgroup per run of up to PER consecutive groups (as many as 420 words hold: 6 Q8_0 groups of
// 8 blocks, 24 of 2, 1 Q6_K group; a workgroup per small group made 442k workgroups of the
// output head of a small model, each a task on a CPU adapter): it copies the run's words into
// workgroup memory, then writes them back regrouped. Groups are whole word-aligned runs of the
// buffer, so no word is shared between workgroups.
// Bindings: 0 {groups, kind, G, PER}, 1 W: the rows from byte 0. Grid: a workgroup per run,
// wrapping into workgroup_id.y past 65535 (program::grid).
struct P { groups: u32, kind: u32, blocks: u32, per: u32 };
@bind var<uniform> p: P;
@bind var<storage, read_write> W: array<u32>;
var<workgroup> g: array<u32, 420>;

// The halfword at even byte b of the run as uploaded.
fn h(b: u32) -> u32 {
  return (g[b >> 2u] >> ((b & 2u) << 3u)) & 0xffffu;
}

// The halfword at even byte o of the regrouped run: in the group at byte g0 = o - o % (G BB),
// at r = o - g0, byte r % Q of block r / Q's bytes without d (Q = BB - 2 = 32 or 208: d comes
// first in a Q8_0 block, last in a Q6_K one), or past the G blocks' (G Q bytes), d of block
// (r - G Q) / 2.
fn regrouped(o: u32) -> u32 {
  let bb = select(34u, 210u, p.kind == 1u);
  let q = bb - 2u;
  let skip = select(2u, 0u, p.kind == 1u);
  let g0 = o - o % (p.blocks * bb);
  let r = o - g0;
  if (r < p.blocks * q) { return h(g0 + bb * (r / q) + skip + r % q); }
  return h(g0 + bb * ((r - p.blocks * q) >> 1u) + select(0u, q, p.kind == 1u));
}

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wg: vec3u, @builtin(num_workgroups) nwg: vec3u, @builtin(local_invocation_id) l: vec3u) {
  let first = (wg.y * nwg.x + wg.x) * p.per;
  if (first >= p.groups) { return; }
  let group_words = p.blocks * select(34u, 210u, p.kind == 1u) / 4u;
  let words = min(p.per, p.groups - first) * group_words;
  let w0 = first * group_words;
  for (var i = l.x; i < words; i += 64u) {
    g[i] = W[w0 + i];
  }
  workgroupBarrier();
  for (var i = l.x; i < words; i += 64u) {
    W[w0 + i] = regrouped(4u * i) | (regrouped(4u * i + 2u) << 16u);
  }
}
