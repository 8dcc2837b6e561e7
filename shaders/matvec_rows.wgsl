// matvec_rows.wgsl: the matrix-vector kernel's GPU form (kernels::MatvecForm::Rows; after
// matvec.wgsl): each row group's TPR threads side by side along its rows, then the row's TPR
// partial sums added (by subgroup shuffles with SG, then in workgroup memory: matvec_end.wgsl).
// Thread t of a row group takes the spans of SPAN weights t, t + TPR, ... of each of its rows
// (so that the TPR threads' loads of weights and of X are side by side: a few cache lines per
// load instruction, not one per thread), UN spans at a time, their UNG x RPT loads issued
// before any is used: decode is bound by memory latency x loads in flight. A span is NG = SPAN
// / 4 groups of 4 weights, each decoded with the format's decoder (dqm, below) and multiplied
// into all NT token rows. With WIDE (matvec.wgsl) the row's 16-byte pieces instead, each run of
// RJ vec4s decoded by the format's pdq. (CPU adapters without subgroups take this form too,
// with TPR = 1 and spans of 32.)

// Weights cb + o .. cb + o + 4 of the span starting at column cb: when a span lies within one of
// the format's scale groups, through dq4s, so that its NG calls share the block and scale
// decoding (the same expressions of cb; formats/common.wgsl); when it is whole 32-weight steps
// (CPU adapters' spans, linear::span), through dq4a, whose calls share a block's loads the same
// way (o is a literal).
fn dqm(rb: u32, cb: u32, o: u32) -> vec4<f32> {
  if (GROUP % SPAN == 0u) { return dq4s(rb, cb, o); }
  if (SPAN % 32u == 0u) { return dq4a(rb, cb + (o & ~31u), o & 31u); }
  return dq4(rb, cb + o);
}

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wg: vec3u, @builtin(num_workgroups) nwg: vec3u,
        @builtin(local_invocation_id) l: vec3u) {
//@include matvec_begin
//@if WIDE
  let pieces = select(0u, p.cols / PIECE, row < p.rows);
  for (var base = 0u; base < pieces; base += UN * TPR) {
//@include matvec_pieces
//@for u < UN
//@for r < RUNS
//@for j < RJ
//@for k < NT
    {
      let c = pcol(pc_$u, $ru) + 4u * $ju;
      var x = select(vec4<f32>(), xv4((b.y + $ku) * p.x_stride + c), ok_$u);
//@if NORM
      ss_$k += dot(x, x);
      x *= nw4(c);
//@end
//@for i < RPT
      s_$k_$i += dot(pdq(q_$u_$i, $ru, $ju), x);
//@if GLU
      u_$k_$i += dot(pdq(qu_$u_$i, $ru, $ju), x);
//@end
//@end
    }
//@end
//@end
//@end
//@end
  }
  let first = (p.cols / PIECE) * PIECE;
//@end
//@if !WIDE
  // The span form.
  let spans = select(0u, p.cols / SPAN, row < p.rows);
  // Whole steps of UN x TPR spans (every thread the same count).
  for (var base = 0u; base + UN * TPR <= spans; base += UN * TPR) {
    let sp = base + t;
//@for j < UNG
    let cb_$j = (sp + ($ju / NG) * TPR) * SPAN;
    let c_$j = cb_$j + 4u * ($ju % NG);
//@for i < RPT
    let w_$j_$i = dqm(rb_$i, cb_$j, 4u * ($ju % NG));
//@if GLU
    let v_$j_$i = dqm(ru_$i, cb_$j, 4u * ($ju % NG));
//@end
//@end
//@end
//@for j < UNG
//@for k < NT
    {
      var x = xv4((b.y + $ku) * p.x_stride + c_$j);
//@if NORM
      ss_$k += dot(x, x);
      x *= nw4(c_$j);
//@end
//@for i < RPT
      s_$k_$i += dot(w_$j_$i, x);
//@if GLU
      u_$k_$i += dot(v_$j_$i, x);
//@end
//@end
    }
//@end
//@end
  }
  let first = ((spans / TPR) / UN) * UN * TPR * SPAN;
//@end
//@include matvec_end
}
