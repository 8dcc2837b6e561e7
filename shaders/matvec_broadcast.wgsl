// matvec_broadcast.wgsl: the matrix-vector kernel's CPU-adapter form (kernels::MatvecForm::Broadcast;
// after matvec.wgsl): a whole row group per invocation (TPR = 1, so no reduction), spans of 32,
// subgroups of SG >= 4 lanes. Every lane of a subgroup steps through the same 32 columns, so
// lane k loads vec4s k, k + SG, ... of the step's 8 (of X, and of NW with NORM) and
// subgroupBroadcast hands each to every lane: such compilers load an address shared by the
// lanes once per lane, so the activations cost 2 loads a lane a step instead of 8 (16 with
// NORM). The weights are decoded a 32-weight block at a time: by the format's block dot product
// where it has one (BDOT: bdot, formats/common.wgsl), else by dq4a.

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wg: vec3u, @builtin(num_workgroups) nwg: vec3u,
        @builtin(subgroup_invocation_id) lane: u32,
        @builtin(local_invocation_id) l: vec3u) {
//@include matvec_begin
  let steps = select(0u, p.cols / 32u, (p.x_stride & 3u) == 0u);
  for (var cb = 0u; cb < 32u * steps; cb += 32u) {
//@for k < NT
    var xl_$k = array<vec4<f32>, (8u + SG - 1u) / SG>();
//@if NORM
    var nl_$k = array<vec4<f32>, (8u + SG - 1u) / SG>();
//@end
//@for r < XR
    xl_$k[$r] = X[(((b.y + $ku) * p.x_stride + cb) >> 2u) + min(SG * $ru + lane, 7u)];
//@if NORM
    nl_$k[$r] = NW[(cb >> 2u) + min(SG * $ru + lane, 7u)];
//@end
//@end
//@for g < 8
    var x_$k_$g = subgroupBroadcast(xl_$k[$gu / SG], $gu % SG);
//@if NORM
    ss_$k += dot(x_$k_$g, x_$k_$g);
    x_$k_$g *= subgroupBroadcast(nl_$k[$gu / SG], $gu % SG);
//@end
//@end
//@end
//@if BDOT
    // The format's block dot product (a block's words and scales loaded once; formats/common.wgsl).
//@for k < NT
    {
      let xa = array<vec4<f32>, 8>(x_$k_0, x_$k_1, x_$k_2, x_$k_3, x_$k_4, x_$k_5, x_$k_6, x_$k_7);
      let xs = dot((x_$k_0 + x_$k_1) + (x_$k_2 + x_$k_3) + ((x_$k_4 + x_$k_5) + (x_$k_6 + x_$k_7)), vec4<f32>(1.0));
//@for i < RPT
      s_$k_$i += bdot(rb_$i, cb, xa, xs);
//@if GLU
      u_$k_$i += bdot(ru_$i, cb, xa, xs);
//@end
//@end
    }
//@end
//@end
//@if !BDOT
//@for g < 8
//@for i < RPT
    {
      let w = dq4a(rb_$i, cb, 4u * $gu);
//@if GLU
      let v = dq4a(ru_$i, cb, 4u * $gu);
//@end
//@for k < NT
      s_$k_$i += dot(w, x_$k_$g);
//@if GLU
      u_$k_$i += dot(v, x_$k_$g);
//@end
//@end
    }
//@end
//@end
//@end
  }
  let first = 32u * steps;
//@include matvec_end
}
