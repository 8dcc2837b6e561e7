//! The order a matrix's rows (or a vector's values) are uploaded in.
//!
//! NEOX-style RoPE (Qwen, Phi-3, Gemma: llama.cpp's `LLAMA_ROPE_TYPE_NEOX`) rotates the pairs
//! `(j, j + n_rot / 2)` of each head, where llama's normal mode rotates the adjacent pairs
//! `(2j, 2j + 1)` with the same frequency. Uploading the q and k projections' rows (and their
//! biases and per-head norm weights) so that each NEOX pair lands on adjacent rows makes the
//! normal-mode kernels compute NEOX RoPE: q and k come out with the same permutation of each
//! head's dims, which leaves every score `q . k` unchanged (the same reordering, in reverse,
//! that llama.cpp's converter applies to Llama checkpoints). Values pass through untouched.

/// Which stored row each uploaded row is.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum RowOrder {
    /// As stored.
    #[default]
    Stored,
    /// In each head of `head_dim` rows, rows `2j` and `2j + 1` are the stored rows `j` and
    /// `j + n_rot / 2` (`j < n_rot / 2`); rows from `n_rot` on (partial rotary) as stored, and
    /// every row from `rows` on (the v rows of a fused q/k/v matrix).
    NeoxPairs {
        /// Rows (dims) per head.
        head_dim: u32,
        /// Rotated dims per head (even, at most `head_dim`).
        n_rot: u32,
        /// Rows reordered (whole heads); `u32::MAX` for all.
        rows: u32,
    },
}

impl RowOrder {
    /// The stored row that uploaded row `r` holds.
    pub fn source(self, r: u32) -> u32 {
        match self {
            RowOrder::Stored => r,
            RowOrder::NeoxPairs { rows, .. } if r >= rows => r,
            RowOrder::NeoxPairs { head_dim, n_rot, .. } => {
                let (head, i) = (r / head_dim, r % head_dim);
                let j = match i {
                    i if i >= n_rot => i,
                    i if i % 2 == 0 => i / 2,
                    i => i / 2 + n_rot / 2,
                };
                head * head_dim + j
            }
        }
    }

    /// Rows `first..first + n` in runs of consecutive stored rows: `(uploaded row, stored row,
    /// rows)` each, in uploaded order.
    pub fn runs(self, first: u32, n: u32) -> Vec<(u32, u32, u32)> {
        let mut out: Vec<(u32, u32, u32)> = Vec::new();
        for r in first..first + n {
            let s = self.source(r);
            match out.last_mut() {
                Some((_, s0, len)) if *s0 + *len == s => *len += 1,
                _ => out.push((r, s, 1)),
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::RowOrder;

    #[test]
    fn neox_pairs_are_a_permutation_of_each_head_and_pair_j_with_j_plus_half() {
        let o = RowOrder::NeoxPairs { head_dim: 8, n_rot: 6, rows: u32::MAX };
        let rows: Vec<u32> = (0..16).map(|r| o.source(r)).collect();
        assert_eq!(rows, [0, 3, 1, 4, 2, 5, 6, 7, 8, 11, 9, 12, 10, 13, 14, 15]);
        // The runs cover rows 3..16 in order and say the same, merging where stored rows follow on.
        let expanded: Vec<u32> = o
            .runs(3, 13)
            .iter()
            .flat_map(|&(r, s, n)| (0..n).map(move |i| (r + i, s + i)))
            .map(|(r, s)| {
                assert_eq!(o.source(r), s);
                r
            })
            .collect();
        assert_eq!(expanded, (3..16).collect::<Vec<_>>());
        assert_eq!(o.runs(3, 13).len(), 8);
        assert_eq!(RowOrder::Stored.runs(3, 5), [(3, 3, 5)]);
        // A fused q/k/v matrix: only its first `rows` rows (q and k) are reordered.
        let fused = RowOrder::NeoxPairs { head_dim: 8, n_rot: 6, rows: 8 };
        assert_eq!((0..12).map(|r| fused.source(r)).collect::<Vec<_>>(), [0, 3, 1, 4, 2, 5, 6, 7, 8, 9, 10, 11]);
    }
}
