  // matvec_end.wgsl (the end of every matrix-vector form's main, matvec.wgsl): what the form's
  // loop leaves, from its column `first` (fewer than UN x TPR spans, and the weights past the last
  // whole span or piece), 4 weights at a time, side by side across the threads; the last partial
  // group masked. Then the row's sums joined and written.
  let end = select(0u, p.cols, row < p.rows);
  for (var c = first + 4u * t; c < end; c += 4u * TPR) {
    let m = vec4<u32>(c) + vec4<u32>(0u, 1u, 2u, 3u) < vec4<u32>(p.cols);
//@for i < RPT
    let w_$i = select(vec4<f32>(), dq4(rb_$i, c), m);
//@if GLU
    let v_$i = select(vec4<f32>(), dq4(ru_$i, c), m);
//@end
//@end
//@for k < NT
    {
      let xo = (b.y + $ku) * p.x_stride + c;
      var x = select(vec4<f32>(), vec4<f32>(x1(xo), x1(xo + 1u), x1(xo + 2u), x1(xo + 3u)), m);
//@if NORM
      ss_$k += dot(x, x);
      x *= select(vec4<f32>(), vec4<f32>(nw1(c), nw1(c + 1u), nw1(c + 2u), nw1(c + 3u)), m);
//@end
//@for i < RPT
      s_$k_$i += dot(w_$i, x);
//@if GLU
      u_$k_$i += dot(v_$i, x);
//@end
//@end
    }
//@end
  }
//@if SG
  // With subgroups (SG lanes, fixed): the row's lanes within one subgroup first, by butterfly
  // shuffles, so that every lane holds their sum; workgroup memory then only joins the row's
  // TPR / SG subgroups (no barrier at all when TPR <= SG). Lane = l.x % SG: a 1-D workgroup of
  // whole subgroups is split into consecutive runs of SG invocations (as drivers lay them out).
  for (var h = LANES / 2u; h > 0u; h >>= 1u) {
//@for k < NT
//@if SS
    ss_$k += subgroupShuffleXor(ss_$k, h);
//@end
//@for i < RPT
    s_$k_$i += subgroupShuffleXor(s_$k_$i, h);
//@if GLU
    u_$k_$i += subgroupShuffleXor(u_$k_$i, h);
//@end
//@end
//@end
  }
//@end
//@if !WGRED
  // The row's sums are in this thread (every lane of the row, with SG).
  if (t == 0u && row < p.rows) {
//@for k < NT
    if ($ku < b.x) {
//@if HALF_ROWS
      var y_$k = array<f32, RPT>();
//@end
//@for i < RPT
      if (row + $iu < p.rows) {
//@if QOUT
        // (QV: matvec_idot.wgsl's rows, which its QOUT tail writes as integers.)
        QV[(l.x / TPR) * RPT + $iu] = store($ku, row + $iu, finish(s_$k_$i, u_$k_$i, ss_$k));
//@end
//@if !QOUT
//@if HALF_ROWS
        y_$k[$iu] = finish(s_$k_$i, u_$k_$i, ss_$k);
//@end
//@if !HALF_ROWS
        store($ku, row + $iu, finish(s_$k_$i, u_$k_$i, ss_$k));
//@end
//@end
      }
//@end
//@if HALF_ROWS
      store_halves($ku, row, y_$k);
//@end
    }
//@end
  }
//@end
//@if WGRED
//@for k < NT
//@for i < RPT
  part[l.x][$ku * RPT + $iu] = s_$k_$i;
//@if GLU
  part_up[l.x][$ku * RPT + $iu] = u_$k_$i;
//@end
//@end
//@if SS
  part_ss[l.x][$ku] = ss_$k;
//@end
//@end
  workgroupBarrier();
  for (var h = TPR / 2u; h >= LANES; h >>= 1u) {
    if (t < h) {
      for (var k = 0u; k < NT * RPT; k++) {
        part[l.x][k] += part[l.x + h][k];
//@if GLU
        part_up[l.x][k] += part_up[l.x + h][k];
//@end
      }
//@if SS
      for (var k = 0u; k < NT; k++) { part_ss[l.x][k] += part_ss[l.x + h][k]; }
//@end
    }
    workgroupBarrier();
  }
  if (t == 0u && row < p.rows) {
    for (var k = 0u; k < min(NT, b.x); k++) {
      var ss = 0.0;
//@if SS
      ss = part_ss[l.x][k];
//@end
//@if HALF_ROWS
      var y = array<f32, RPT>();
//@end
      for (var i = 0u; i < min(RPT, p.rows - row); i++) {
        var u = 0.0;
//@if GLU
        u = part_up[l.x][k * RPT + i];
//@end
//@if QOUT
        QV[(l.x / TPR) * RPT + i] = store(k, row + i, finish(part[l.x][k * RPT + i], u, ss));
//@end
//@if !QOUT
//@if HALF_ROWS
        y[i] = finish(part[l.x][k * RPT + i], u, ss);
//@end
//@if !HALF_ROWS
        store(k, row + i, finish(part[l.x][k * RPT + i], u, ss));
//@end
//@end
      }
//@if HALF_ROWS
      store_halves(k, row, y);
//@end
    }
  }
//@end
