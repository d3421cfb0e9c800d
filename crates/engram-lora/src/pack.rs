//! Packing a micro-batch's examples into rows of a fixed length: first-fit decreasing (longest
//! first, each into the first row with room, ties kept in batch order), deterministic in the
//! batch, so a resumed run packs its batches as the uninterrupted one did.

/// The rows (indices into `lengths`, in slot order) for sequences of `lengths` packed into rows
/// of `len` slots. Every length must be at most `len`.
pub fn pack_rows(lengths: &[usize], len: usize) -> Vec<Vec<usize>> {
    let mut order: Vec<usize> = (0..lengths.len()).collect();
    order.sort_by_key(|&i| std::cmp::Reverse(lengths[i]));
    let mut rows: Vec<(usize, Vec<usize>)> = Vec::new();
    for i in order {
        let n = lengths[i];
        assert!(
            n <= len,
            "a sequence of {n} tokens does not fit a row of {len}"
        );
        match rows.iter_mut().find(|(used, _)| used + n <= len) {
            Some((used, row)) => {
                *used += n;
                row.push(i);
            }
            None => rows.push((n, vec![i])),
        }
    }
    rows.into_iter().map(|(_, r)| r).collect()
}

/// Token slots a micro-batch occupies: `(slots, tokens)` for the padded layout (one row per
/// example, as long as the longest) or, with `pack`, for rows of that many slots.
pub fn slots(lengths: &[usize], pack: Option<usize>) -> (usize, usize) {
    let tokens = lengths.iter().sum();
    let slots = match pack {
        None => lengths.len() * lengths.iter().copied().max().unwrap_or(0),
        Some(len) => pack_rows(lengths, len).len() * len,
    };
    (slots, tokens)
}

/// What a run's micro-batches occupy in one layout ([`epoch_layout`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LayoutFigures {
    /// Micro-batches.
    pub batches: usize,
    /// Token slots, padding included.
    pub slots: usize,
    /// Real tokens.
    pub tokens: usize,
    /// Distinct `(rows, slots per row)` batch shapes.
    pub shapes: std::collections::BTreeSet<(usize, usize)>,
}

impl LayoutFigures {
    /// The share of slots that are padding.
    pub fn padding(&self) -> f64 {
        1.0 - self.tokens as f64 / self.slots.max(1) as f64
    }
}

/// The figures of `epochs` epochs of the trainer's micro-batches ([`crate::batches`]) over
/// examples of `lengths`, padded (`pack: None`) or packed into rows of `pack` slots.
pub fn epoch_layout(
    lengths: &[usize],
    batch_size: usize,
    seed: u64,
    epochs: usize,
    pack: Option<usize>,
) -> LayoutFigures {
    let mut f = LayoutFigures {
        batches: 0,
        slots: 0,
        tokens: 0,
        shapes: Default::default(),
    };
    for epoch in 0..epochs {
        for batch in crate::batches::epoch_batches(lengths, batch_size, seed, epoch) {
            let l: Vec<usize> = batch.iter().map(|&i| lengths[i]).collect();
            let (slots, tokens) = self::slots(&l, pack);
            let row = pack.unwrap_or_else(|| l.iter().copied().max().unwrap_or(0));
            f.batches += 1;
            f.slots += slots;
            f.tokens += tokens;
            f.shapes.insert((slots / row.max(1), row));
        }
    }
    f
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_fit_decreasing_fills_rows_and_keeps_every_sequence_once() {
        let lengths = [30, 60, 70, 20, 50, 64];
        let rows = pack_rows(&lengths, 128);
        assert_eq!(rows, vec![vec![2, 4], vec![5, 1], vec![0, 3]]);
        for r in &rows {
            assert!(r.iter().map(|&i| lengths[i]).sum::<usize>() <= 128);
        }
        let mut all: Vec<usize> = rows.concat();
        all.sort();
        assert_eq!(all, (0..lengths.len()).collect::<Vec<_>>());
        assert_eq!(pack_rows(&[128, 1], 128), vec![vec![0], vec![1]]);
        assert_eq!(slots(&lengths, None), (6 * 70, 294));
        assert_eq!(slots(&lengths, Some(128)), (3 * 128, 294));
    }

    #[test]
    fn epoch_figures_count_every_batch_of_every_epoch() {
        let lengths: Vec<usize> = (0..100).map(|i| 40 + (i * 37) % 50).collect();
        let padded = epoch_layout(&lengths, 8, 0, 3, None);
        let packed = epoch_layout(&lengths, 8, 0, 3, Some(128));
        assert_eq!((padded.batches, packed.batches), (39, 39));
        let tokens: usize = 3 * lengths.iter().sum::<usize>();
        assert_eq!((padded.tokens, packed.tokens), (tokens, tokens));
        assert!(
            packed
                .shapes
                .iter()
                .all(|&(rows, len)| len == 128 && rows <= 8)
        );
        assert!(padded.padding() > 0.0 && packed.padding() > 0.0);
        assert!((padded.padding() - (1.0 - tokens as f64 / padded.slots as f64)).abs() < 1e-12);
    }
}
