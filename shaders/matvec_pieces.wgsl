    // matvec_pieces.wgsl (a step of the 16-byte pieces' loop, WIDE: matvec_rows.wgsl,
    // matvec_idot.wgsl): UN pieces (t, t + TPR, ...) of each row, all loaded before any is used;
    // a piece past the row's last loads the last and adds nothing (its inputs are masked to 0).
//@for u < UN
    let ok_$u = base + t + $uu * TPR < pieces;
    let pc_$u = min(base + t + $uu * TPR, pieces - 1u);
//@for i < RPT
    let q_$u_$i = pload(rb_$i, pc_$u);
//@if GLU
    let qu_$u_$i = pload(ru_$i, pc_$u);
//@end
//@end
//@end
