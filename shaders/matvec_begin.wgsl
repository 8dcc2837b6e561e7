  // matvec_begin.wgsl (the start of every matrix-vector form's main, matvec.wgsl): thread t of
  // the row group of `row`, the batch's token rows b, and the accumulators.
  let t = l.x % TPR;
  let row = ((wg.y * nwg.x + wg.x) * RPW + l.x / TPR) * RPT;
  let b = batch_rows();
  let row_bytes = p.cols / BLOCK_ELEMS * BLOCK_BYTES;
  // Row i of the group starts at byte rb_i (its up row at ru_i); rows past the last repeat it,
  // so that every load stays in bounds (only real rows are stored).
//@for i < RPT
  let rb_$i = min(row + $iu, p.rows - 1u) * row_bytes;
  let ru_$i = rb_$i + p.rows * row_bytes;
//@end
//@for k < NT
  var ss_$k = 0.0;
//@for i < RPT
  var s_$k_$i = 0.0;
  var u_$k_$i = 0.0;
//@end
//@end
