//! Attention masks (true = masked) for causal attention over padded rows. Padding is a run of
//! slots per row starting at a common slot `pad_start`: 0 for left-padded prompts, the prefix
//! length when rows share a cached prefix and their own suffixes are left-padded after it.

use burn::tensor::{Bool, Device, Int, Tensor, TensorData};

use crate::length_cache::LengthCache;

/// The mask for `t` new query slots starting at slot `start`, over `start + t` key slots, for rows
/// whose first `pads[b]` slots are padding. Returns `None` when nothing needs masking (a single
/// query slot and no padding).
pub fn attention_mask(
    pads: &[usize],
    start: usize,
    t: usize,
    device: &Device,
) -> Option<Tensor<4, Bool>> {
    attention_mask_from(pads, 0, start, t, device)
}

/// As [`attention_mask`], with each row's padding at slots `pad_start .. pad_start + pads[b]`.
pub fn attention_mask_from(
    pads: &[usize],
    pad_start: usize,
    start: usize,
    t: usize,
    device: &Device,
) -> Option<Tensor<4, Bool>> {
    let s = start + t;
    let any_pad = pads.iter().any(|&p| p > 0);
    if t == 1 && !any_pad {
        return None;
    }
    let b = pads.len();
    let mut m = Vec::with_capacity(b * t * s);
    for &pad in pads {
        let in_pad = |x: usize| x >= pad_start && x < pad_start + pad;
        for q in 0..t {
            let qpos = start + q;
            for k in 0..s {
                // A padding query row would have every key masked: let it see itself, so that
                // softmax stays finite (its output is never used).
                let masked = k > qpos || (in_pad(k) && !(in_pad(qpos) && k == qpos));
                m.push(masked);
            }
        }
    }
    Some(Tensor::from_data(TensorData::new(m, [b, 1, t, s]), device))
}

/// The causal mask of `b` unpadded (or right-padded) rows of `t` slots, `[b, 1, t, t]` (true =
/// masked: keys after the query), built on the device: nothing is uploaded.
pub fn causal_mask(b: usize, t: usize, device: &Device) -> Tensor<4, Bool> {
    causal_part(t, device)
        .reshape([1, 1, t, t])
        .expand([b, 1, t, t])
}

/// Causal parts `[t, t]` kept on their device: a training run asks for the same few lengths
/// every step, and building one is two `arange`s and a comparison (with the broadcast, seven
/// kernels a step on llvmpipe). At most 8 lengths are kept.
static CAUSAL_PARTS: LengthCache<Tensor<2, Bool>> = LengthCache::new(8);

/// The longest causal part kept (`t²` booleans: a long prompt's mask is built, used and
/// dropped).
const CACHED_CAUSAL_MAX_LEN: usize = 1024;

/// `[t, t]`, true above the diagonal (a query never sees a later key), from the cache where
/// kept.
fn causal_part(t: usize, device: &Device) -> Tensor<2, Bool> {
    let build = || Tensor::<2, Bool>::tril_mask([t, t], 0, device);
    if t > CACHED_CAUSAL_MAX_LEN {
        return build();
    }
    CAUSAL_PARTS.get_or_build(device, t, build)
}

/// The mask of packed rows, `[rows, 1, len, len]`, built on the device from each slot's segment
/// (`segments: [rows, len]`): a query sees the keys of its own segment up to itself — causal
/// attention inside each packed sequence, a block-diagonal mask over the row. Padding slots
/// carry segments of their own, so they see only themselves and softmax stays finite.
pub fn segment_mask(segments: Tensor<2, Int>) -> Tensor<4, Bool> {
    let [r, t] = segments.dims();
    let device = segments.device();
    let q = segments.clone().reshape([r, 1, t, 1]).expand([r, 1, t, t]);
    let k = segments.reshape([r, 1, 1, t]).expand([r, 1, t, t]);
    q.not_equal(k).bool_or(causal_mask(r, t, &device))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn causal_with_left_padding() {
        let dev = Device::flex();
        let m = attention_mask(&[0, 2], 0, 3, &dev).unwrap();
        let v: Vec<bool> = m.into_data().try_into_vec::<bool>().unwrap();
        #[rustfmt::skip]
        let want = vec![
            false, true, true,   false, false, true,   false, false, false,
            false, true, true,   true, false, true,    true, true, false,
        ];
        assert_eq!(v, want);
        assert!(attention_mask(&[0, 0], 5, 1, &dev).is_none());
        let d: Vec<bool> = attention_mask(&[1], 3, 1, &dev)
            .unwrap()
            .into_data()
            .try_into_vec::<bool>()
            .unwrap();
        assert_eq!(d, vec![true, false, false, false]);
        // Shared prefix of 2 slots, then one padding slot for row 1.
        let g: Vec<bool> = attention_mask_from(&[0, 1], 2, 2, 2, &dev)
            .unwrap()
            .into_data()
            .try_into_vec::<bool>()
            .unwrap();
        #[rustfmt::skip]
        let want = vec![
            false, false, false, true,   false, false, false, false,
            false, false, false, true,   false, false, true, false,
        ];
        assert_eq!(g, want);
    }

    #[test]
    fn causal_and_segment_masks_built_on_the_device() {
        let dev = Device::flex();
        let host: Vec<bool> = attention_mask(&[0, 0], 0, 3, &dev)
            .unwrap()
            .into_data()
            .try_into_vec::<bool>()
            .unwrap();
        let device: Vec<bool> = causal_mask(2, 3, &dev)
            .into_data()
            .try_into_vec::<bool>()
            .unwrap();
        assert_eq!(device, host);
        // One row: a sequence of 2 slots, one of 1, then a padding slot (segment of its own).
        let seg = Tensor::<2, Int>::from_data(TensorData::new(vec![0i64, 0, 1, 9], [1, 4]), &dev);
        let m: Vec<bool> = segment_mask(seg)
            .into_data()
            .try_into_vec::<bool>()
            .unwrap();
        #[rustfmt::skip]
        let want = vec![
            false, true, true, true,
            false, false, true, true,
            true, true, false, true,
            true, true, true, false,
        ];
        assert_eq!(m, want);
    }

    #[test]
    fn a_kept_causal_mask_serves_other_batch_sizes_and_the_autodiff_device() {
        let plain = Device::flex();
        let values = |m: Tensor<4, Bool>| m.into_data().try_into_vec::<bool>().unwrap();
        let first = values(causal_mask(1, 5, &plain));
        // Kept: a later call for another batch size gives each row the same mask.
        let again = values(causal_mask(3, 5, &plain));
        assert_eq!(again, first.repeat(3));
        // On the autodiff device the mask serves a tracked tensor's mask_fill.
        let ad = plain.clone().autodiff();
        let x = Tensor::<4>::ones([2, 1, 5, 5], &ad).require_grad();
        let filled = x.clone().mask_fill(causal_mask(2, 5, &ad), 0.0);
        let grads = filled.sum().backward();
        let g: Vec<f32> = x
            .grad(&grads)
            .unwrap()
            .into_data()
            .try_into_vec::<f32>()
            .unwrap();
        let want: Vec<f32> = first.iter().map(|&m| if m { 0.0 } else { 1.0 }).collect();
        assert_eq!(g, want.repeat(2));
        // Longer than the kept lengths: built each time, the same values.
        let t = CACHED_CAUSAL_MAX_LEN + 1;
        let long = values(causal_mask(1, t, &plain));
        assert!(long[1] && !long[t]);
    }
}
