// matvec: Y (+)= W X for a few tokens (NT at most; 1 when decoding), reading each weight once.
// Bindings and layout: linear.wgsl. Composed (kernels::compose) with `const TPR, RPW, NT, SPAN,
// NG, UN, NORM, GLU`: workgroup of 64 = RPW rows x TPR threads per row; thread t of a row takes
// the spans of SPAN weights t, t + TPR, ... (so that the TPR threads' loads of weights and of X
// are side by side: a few cache lines per load instruction, not one per thread), UN spans at a
// time (their loads issued before any is used: decode is bound by memory latency x loads in
// flight). A span is NG = SPAN / 4 groups of 4 weights, each decoded with the format's dq4: a
// span that covers a block's (or sub-block's) scale lets the compiler load and decode that scale
// once, not once per 4 weights (a K-quant's scale decode costs more than its 4 products). Each
// group is multiplied into all NT token rows; the row's TPR partial sums are then added in
// workgroup memory. Workgroups past 65535 wrap into workgroup_id.y. The maths: each weight is
// exactly ggml's dequantised f32 value, then an f32 dot product per token.
//
// Decode fusions (linear::Fuse), so that a decoded token needs fewer dispatches:
// NORM = 1: X holds the raw residual stream and NW the RMSNorm weights; the kernel computes
//   (W (x * nw)) / sqrt(mean(x^2) + eps), the sum of squares taken from the same loads of x
//   (the row's threads read all of x between them), instead of reading rmsnorm.wgsl's output.
// GLU = 1: W is [gate; up] (2 * p.rows rows); row r of the output is
//   silu(gate_r . x) * (up_r . x) (SwiGLU), the two rows sharing each load of x.
//@if NORM
@group(0) @binding(5) var<storage, read> NW: array<vec4<f32>>;
//@end
struct Acc { s: array<f32, NT>, ss: array<f32, NT>, up: array<f32, NT> };
var<workgroup> part: array<Acc, 64>;

// Adds weights c .. c + 4 (w of the row, wu of its up row under GLU) times every token's inputs.
fn fma4(a: ptr<function, Acc>, w: vec4<f32>, wu: vec4<f32>, c: u32, x0: u32) {
  for (var k = 0u; k < NT; k++) {
    var x = xv4((x0 + k) * p.x_stride + c);
//@if NORM
    (*a).ss[k] += dot(x, x);
    if ((c & 3u) == 0u) { x *= NW[c >> 2u]; } else { x *= vec4<f32>(nw1(c), nw1(c + 1u), nw1(c + 2u), nw1(c + 3u)); }
//@end
    (*a).s[k] += dot(w, x);
    if (GLU != 0u) { (*a).up[k] += dot(wu, x); }
  }
}

//@if NORM
fn nw1(i: u32) -> f32 {
  return NW[i >> 2u][i & 3u];
}
//@end

// Weights c .. c + 4 of the up row (GLU only).
fn up4(ru: u32, c: u32) -> vec4<f32> {
  if (GLU != 0u) { return dq4(ru, c); }
  return vec4<f32>();
}

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wg: vec3u, @builtin(num_workgroups) nwg: vec3u,
        @builtin(local_invocation_id) l: vec3u) {
  let t = l.x % TPR;
  let row = (wg.y * nwg.x + wg.x) * RPW + l.x / TPR;
  let b = batch_rows();
  var a: Acc;
  if (row < p.rows) {
    let row_bytes = p.cols / BLOCK_ELEMS * BLOCK_BYTES;
    let rb = row * row_bytes;
    let ru = rb + p.rows * row_bytes;
    let spans = p.cols / SPAN;
    var sp = t;
    for (; sp + (UN - 1u) * TPR < spans; sp += UN * TPR) {
      var w: array<vec4<f32>, UN * NG>;
      var wu: array<vec4<f32>, UN * NG>;
      for (var j = 0u; j < UN * NG; j++) {
        let c = (sp + (j / NG) * TPR) * SPAN + 4u * (j % NG);
        w[j] = dq4(rb, c);
        wu[j] = up4(ru, c);
      }
      for (var j = 0u; j < UN * NG; j++) {
        fma4(&a, w[j], wu[j], (sp + (j / NG) * TPR) * SPAN + 4u * (j % NG), b.y);
      }
    }
    // The spans left (fewer than UN per thread), the groups past the last whole span, then the
    // weights past the last whole group.
    for (; sp < spans; sp += TPR) {
      for (var i = 0u; i < NG; i++) {
        let c = sp * SPAN + 4u * i;
        fma4(&a, dq4(rb, c), up4(ru, c), c, b.y);
      }
    }
    let groups = p.cols / 4u;
    for (var g = spans * NG + t; g < groups; g += TPR) {
      fma4(&a, dq4(rb, 4u * g), up4(ru, 4u * g), 4u * g, b.y);
    }
    for (var c = groups * 4u + t; c < p.cols; c += TPR) {
      let w = dequant(rb, c);
      var wu = 0.0;
      if (GLU != 0u) { wu = dequant(ru, c); }
      for (var k = 0u; k < NT; k++) {
        var x = x1((b.y + k) * p.x_stride + c);
//@if NORM
        a.ss[k] += x * x;
        x *= nw1(c);
//@end
        a.s[k] += w * x;
        a.up[k] += wu * x;
      }
    }
  }
  part[l.x] = a;
  workgroupBarrier();
  for (var h = TPR / 2u; h > 0u; h >>= 1u) {
    if (t < h) {
      for (var k = 0u; k < NT; k++) {
        part[l.x].s[k] += part[l.x + h].s[k];
        if (NORM != 0u) { part[l.x].ss[k] += part[l.x + h].ss[k]; }
        if (GLU != 0u) { part[l.x].up[k] += part[l.x + h].up[k]; }
      }
    }
    workgroupBarrier();
  }
  if (t == 0u && row < p.rows) {
    for (var k = 0u; k < NT; k++) {
      if (k < b.x) {
        var v = part[l.x].s[k];
        var u = part[l.x].up[k];
        if (NORM != 0u) {
          let inv = 1.0 / sqrt(part[l.x].ss[k] / f32(p.cols) + p.eps);
          v *= inv;
          u *= inv;
        }
        if (GLU != 0u) { v = v / (1.0 + exp(-v)) * u; }
        store(k, row, v);
      }
    }
  }
}
