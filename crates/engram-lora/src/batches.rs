//! Length-bucketed, shuffled batches (as transformers' `group_by_length`): each epoch the
//! examples are shuffled, cut into mega-batches of 50 batches, sorted by length inside each
//! mega-batch and cut into batches, and the batch order is shuffled. Deterministic in
//! `(seed, epoch)`, so a resumed run sees the same batches.

use rand::SeedableRng;
use rand::rngs::StdRng;
use rand::seq::SliceRandom;

/// Batches per mega-batch.
const MEGA: usize = 50;

/// The batches (indices into `lengths`) of epoch `epoch` (0-based).
pub fn epoch_batches(lengths: &[usize], batch: usize, seed: u64, epoch: usize) -> Vec<Vec<usize>> {
    let batch = batch.max(1);
    let mut rng = StdRng::seed_from_u64(
        seed.wrapping_mul(0x9E37_79B9_7F4A_7C15)
            .wrapping_add(epoch as u64),
    );
    let mut order: Vec<usize> = (0..lengths.len()).collect();
    order.shuffle(&mut rng);
    let mut batches = Vec::new();
    for mega in order.chunks(batch * MEGA) {
        let mut mega = mega.to_vec();
        mega.sort_by_key(|&i| std::cmp::Reverse(lengths[i]));
        batches.extend(mega.chunks(batch).map(<[usize]>::to_vec));
    }
    batches.shuffle(&mut rng);
    batches
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn covers_every_example_once_and_is_deterministic() {
        let lengths: Vec<usize> = (0..103).map(|i| (i * 37) % 50 + 5).collect();
        let a = epoch_batches(&lengths, 8, 3, 1);
        assert_eq!(a, epoch_batches(&lengths, 8, 3, 1));
        assert_ne!(a, epoch_batches(&lengths, 8, 3, 2));
        let mut all: Vec<usize> = a.iter().flatten().copied().collect();
        all.sort();
        assert_eq!(all, (0..103).collect::<Vec<_>>());
        assert!(a.iter().all(|b| b.len() <= 8));
    }

    #[test]
    fn batches_group_similar_lengths() {
        let lengths: Vec<usize> = (0..400).map(|i| (i * 7919) % 100 + 1).collect();
        let spread = |bs: &[Vec<usize>]| -> usize {
            bs.iter()
                .map(|b| {
                    let l: Vec<usize> = b.iter().map(|&i| lengths[i]).collect();
                    l.iter().max().unwrap() - l.iter().min().unwrap()
                })
                .sum()
        };
        let grouped = epoch_batches(&lengths, 8, 0, 0);
        // Unsorted chunks of a shuffled order for comparison.
        let plain: Vec<Vec<usize>> = (0..400)
            .collect::<Vec<_>>()
            .chunks(8)
            .map(<[usize]>::to_vec)
            .collect();
        assert!(spread(&grouped) * 4 < spread(&plain));
    }
}
