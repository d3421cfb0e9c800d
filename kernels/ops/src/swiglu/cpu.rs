//! The SwiGLU product's one-pass CPU path for inference (see [`crate::cpu`] for the numerics).

use burn::tensor::Tensor;

use crate::cpu::{each_row, host, tensor, values};

/// `silu(gate) · up` for two tensors of one shape, as engram-model's `Mlp` writes it in Burn
/// ops (`silu(g) = g · sigmoid(g)`, by flex's sigmoid formula), eight values at a time
/// ([`engram_kernels::silu_mul`]).
pub fn swiglu<const D: usize>(gate: &Tensor<D>, up: &Tensor<D>) -> Option<Tensor<D>> {
    let dims = gate.dims();
    if up.dims() != dims {
        return None;
    }
    let (gt, ut) = (host(gate)?, host(up)?);
    let (g, u) = (values(&gt), values(&ut));
    let width = dims[D - 1].max(1);
    let mut out = vec![0f32; g.len()];
    each_row(&mut out, width, |r, o| {
        let (gr, ur) = (&g[r * width..][..width], &u[r * width..][..width]);
        engram_kernels::silu_mul(gr, ur, o);
    });
    Some(tensor(out, dims))
}

#[cfg(test)]
mod tests {
    use burn::tensor::Device;
    use burn::tensor::activation::silu;

    use super::swiglu;
    use crate::cpu::{bits, random};

    #[test]
    fn swiglu_gives_burns_bits() {
        let device = Device::flex();
        device.seed(5);
        // Values of both signs and large ones (exp overflowing on either side).
        for shape in [[1, 1, 1536], [4, 9, 1536]] {
            let g = random(shape, 30.0, &device);
            let u = random(shape, 1.0, &device);
            let got = swiglu(&g, &u).expect("applies on the CPU backend");
            assert_eq!(bits(got), bits(silu(g) * u), "{shape:?}");
        }
    }
}
