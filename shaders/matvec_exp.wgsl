// matvec_exp: the selected experts' gate or up projections per token,
// Y[i][y0 + j * rows + r] = sum_c W[sel[i][j]][r][c] X[i][c], over an expert stack
// [E][rows][cols] kept in its GGUF storage format, split into parts of whole experts (experts
// e0 .. e0 + ne in this dispatch's buffer; a pick outside them is another part's). Composed like
// matvec.wgsl (TPR, RPW, formats/common.wgsl, formats/<type>.wgsl).
// Bindings: 0 {rows = ff_exp, cols = d, e0 | ne << 16, y0, k, x_stride, y_stride}, 1 step
// {n_tokens}, 2 sel [tokens][k] u32, 3 W: experts e0.. as stored (expert e row r at byte
// ((e - e0) * rows + r) * row_bytes), 4 X [tokens][x_stride], 5 Y [tokens][y_stride].
// Workgroup (x, j, i): RPW rows x TPR threads of pick j of token i, reduced in workgroup memory.
struct P { rows: u32, cols: u32, experts: u32, y0: u32, k: u32, x_stride: u32, y_stride: u32, _a: u32 };
@bind var<uniform> p: P;
@bind var<uniform> st: Step;
@bind var<storage, read> sel: array<u32>;
@bind var<storage, read> W: array<u32>;
@bind var<storage, read> X: array<vec4<f32>>;
@bind var<storage, read_write> Y: array<f32>;
var<workgroup> part: array<f32, 64>;

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wg: vec3u, @builtin(local_invocation_id) l: vec3u) {
  let t = l.x % TPR;
  let row = wg.x * RPW + l.x / TPR;
  let j = wg.y;
  let i = wg.z;
  let e = sel[min(i, st.n_tokens - 1u) * p.k + j];
  let e0 = p.experts & 0xffffu;
  let ne = p.experts >> 16u;
  let mine = row < p.rows && i < st.n_tokens && e >= e0 && e < e0 + ne;
  var s = 0.0;
  if (mine) {
    let rb = ((e - e0) * p.rows + row) * (p.cols / BLOCK_ELEMS * BLOCK_BYTES);
    s = row_dot(rb, p.cols, i * p.x_stride, t, TPR);
  }
  part[l.x] = s;
  workgroupBarrier();
  for (var h = TPR / 2u; h > 0u; h >>= 1u) {
    if (t < h) { part[l.x] += part[l.x + h]; }
    workgroupBarrier();
  }
  if (t == 0u && mine) { Y[i * p.y_stride + p.y0 + j * p.rows + row] = part[l.x]; }
}
