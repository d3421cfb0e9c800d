//! RoPE's one-pass CPU path for inference (see [`crate::cpu`] for the numerics).

use burn::tensor::Tensor;

use crate::cpu::{each_row, host, tensor, values};

/// `x · cos + swap_halves(x) · sin` for `x: [batch, seq, heads, head_dim]` and [`crate::rope`]'s
/// tables (`[batch or 1, seq, 1, head_dim]`, `sin` signed), as engram-model's `apply_rotary`
/// writes it in Burn ops.
pub fn rotary(x: &Tensor<4>, cos: &Tensor<4>, sin: &Tensor<4>) -> Option<Tensor<4>> {
    let [b, t, h, d] = x.dims();
    let [cb, ct, ch, cd] = cos.dims();
    if sin.dims() != cos.dims() || (cb != b && cb != 1) || ct != t || ch != 1 || cd != d {
        return None;
    }
    let (xt, ct, st) = (host(x)?, host(cos)?, host(sin)?);
    let (xs, cos, sin) = (values(&xt), values(&ct), values(&st));
    let half = d / 2;
    let mut out = vec![0f32; xs.len()];
    // One output row per (batch, position): its heads share a row of the tables.
    each_row(&mut out, h * d, |r, o| {
        let (bi, s) = (r / t, r % t);
        let table = (if cb == 1 { s } else { bi * t + s }) * d;
        let (c, sn) = (&cos[table..][..d], &sin[table..][..d]);
        for (head, oh) in o.chunks_exact_mut(d).enumerate() {
            let xh = &xs[(r * h + head) * d..][..d];
            for (i, v) in oh.iter_mut().enumerate() {
                let swapped = xh[if i < half { i + half } else { i - half }];
                *v = xh[i] * c[i] + swapped * sn[i];
            }
        }
    });
    Some(tensor(out, [b, t, h, d]))
}

#[cfg(test)]
mod tests {
    use burn::tensor::Device;

    use super::rotary;
    use crate::cpu::{bits, random};
    use crate::rope::rotary as rotary_ops;

    #[test]
    fn rotary_gives_burns_bits() {
        let device = Device::flex();
        device.seed(4);
        let (b, t, h, d) = (3, 5, 4, 16);
        let x = random([b, t, h, d], 1.0, &device);
        // Shared tables ([1, t, 1, d]) and per-row ones ([b, t, 1, d]).
        for cb in [1, b] {
            let (cos, sin) = (
                random([cb, t, 1, d], 1.0, &device),
                random([cb, t, 1, d], 1.0, &device),
            );
            let got = rotary(&x, &cos, &sin).expect("applies on the CPU backend");
            let want = bits(rotary_ops(x.clone(), &cos, &sin));
            assert_eq!(bits(got), want, "{cb}");
        }
        let bad = random([1, t + 1, 1, d], 1.0, &device);
        assert!(rotary(&x, &bad, &bad).is_none(), "tables of another length");
    }
}
