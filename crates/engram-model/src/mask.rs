//! Attention masks (true = masked) for causal attention over left-padded rows.

use burn::tensor::{Bool, Device, Tensor, TensorData};

/// The mask for `t` new query slots starting at slot `start`, over `start + t` key slots, for rows
/// whose first `pads[b]` slots are padding. Returns `None` when nothing needs masking (a single
/// query slot and no padding).
pub fn attention_mask(
    pads: &[usize],
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
        for q in 0..t {
            let qpos = start + q;
            for k in 0..s {
                // A padding query row would have every key masked: let it see itself, so that
                // softmax stays finite (its output is never used).
                let masked = k > qpos || (k < pad && !(qpos < pad && k == qpos));
                m.push(masked);
            }
        }
    }
    Some(Tensor::from_data(TensorData::new(m, [b, 1, t, s]), device))
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
    }
}
