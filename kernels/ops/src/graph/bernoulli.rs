//! Bernoulli draws keyed by a counter on the device: dropout masks a replayed graph draws anew.
//!
//! Burn's random kernels take their seeds as launch arguments from a host RNG, so a replayed
//! graph would draw the masks of its capture on every step. Here each element is a hash of its
//! index and a key read from a `[1]` device tensor (the counter a captured step advances), so
//! the same recorded launch draws a new mask whenever the counter moves. The hash is Chris
//! Wellons' `lowbias32` (two rounds, keyed); its top 24 bits make a uniform in `[0, 1)`. The
//! stream differs from Burn's (`cubek-random`'s), element by element independent just the same.

use burn::tensor::{DType, Device, Tensor, TensorData};

/// One round of `lowbias32`.
fn mix(mut x: u32) -> u32 {
    x ^= x >> 16;
    x = x.wrapping_mul(0x7feb_352d);
    x ^= x >> 15;
    x = x.wrapping_mul(0x846c_a68b);
    x ^= x >> 16;
    x
}

/// Draw `pos` of stream `key`: 1 with probability `keep`, else 0 (the host's copy of the
/// kernel's arithmetic).
pub fn draw(key: u32, pos: u32, keep: f32) -> f32 {
    let h = mix(mix(pos ^ mix(key)) ^ mix(key ^ 0x68e3_1da4));
    let u = (h >> 8) as f32 * (1.0 / 16_777_216.0);
    if u < keep { 1.0 } else { 0.0 }
}

/// `len` draws, each 1 with probability `keep` and 0 otherwise, of the stream keyed by
/// `counter`'s value (a `[1]` f32 tensor holding a whole number below 2²⁴), as f32 on
/// `counter`'s device. On the CubeCL backends one kernel reads the key on the device; elsewhere
/// the key is read to the host and the same values are drawn there.
pub fn bernoulli(counter: &Tensor<1>, len: usize, keep: f64) -> Tensor<1> {
    assert!(len <= u32::MAX as usize, "bernoulli: {len} draws");
    #[cfg(any(feature = "wgpu", feature = "cuda"))]
    if let Some(t) = cube::bernoulli(counter, len, keep as f32) {
        return t;
    }
    let key = counter
        .clone()
        .into_data()
        .try_into_vec_as::<f32>()
        .expect("f32")[0] as u32;
    let values: Vec<f32> = (0..len as u32).map(|p| draw(key, p, keep as f32)).collect();
    let device: Device = counter.device();
    Tensor::from_data(TensorData::new(values, [len]), (&device, DType::F32))
}

#[cfg(any(feature = "wgpu", feature = "cuda"))]
mod cube {
    use burn::tensor::{DType, Shape, Tensor as BurnTensor};
    use cubecl::prelude::*;

    use crate::cube_op::{fixed_launch, plain_f32, plain_tensor};

    #[cube]
    fn mix(x: u32) -> u32 {
        let mut x = x;
        x ^= x >> 16;
        x *= 0x7feb_352du32;
        x ^= x >> 15;
        x *= 0x846c_a68bu32;
        x ^= x >> 16;
        x
    }

    /// `out[pos]` = draw `pos` of the stream keyed by `counter[0]` ([`super::draw`]).
    #[cube(launch_unchecked)]
    fn bernoulli_kernel(counter: &Tensor<f32>, out: &mut Tensor<f32>, keep: f32, len: usize) {
        let pos = ABSOLUTE_POS;
        if pos >= len {
            terminate!();
        }
        let key = u32::cast_from(counter[0]);
        let h = mix(mix(u32::cast_from(pos) ^ mix(key)) ^ mix(key ^ 0x68e3_1da4u32));
        let u = f32::cast_from(h >> 8) * (1.0f32 / 16_777_216.0f32);
        out[pos] = select(u < keep, 1.0f32, 0.0f32);
    }

    /// [`super::bernoulli`] on the CubeCL backends, `None` where the counter is not a plain
    /// f32 tensor of one.
    pub(super) fn bernoulli(
        counter: &BurnTensor<1>,
        len: usize,
        keep: f32,
    ) -> Option<BurnTensor<1>> {
        let fused = plain_f32(counter)?;
        let out = crate::cube_op::register(
            "engram_bernoulli",
            vec![fused],
            Shape::from([len]),
            DType::F32,
            move |mut t| {
                let counter = t.pop().expect("counter");
                let out = burn_cubecl::ops::numeric::empty_device_contiguous_dtype(
                    counter.client.clone(),
                    counter.device.clone(),
                    Shape::from([len]),
                    DType::F32,
                );
                let client = out.client.clone();
                let (cube_count, cube_dim) = fixed_launch(&client, len);
                // SAFETY: units below `len` write `out` (`len` elements); `counter` has one.
                unsafe {
                    bernoulli_kernel::launch_unchecked(
                        &client,
                        cube_count,
                        cube_dim,
                        counter.into_tensor_arg(),
                        out.clone().into_tensor_arg(),
                        keep,
                        len,
                    );
                }
                out
            },
        );
        Some(plain_tensor(out))
    }
}

#[cfg(test)]
mod tests {
    use burn::tensor::{DType, Device, Tensor, TensorData};

    use super::{bernoulli, draw};
    use crate::testing::f32_values;

    fn counter(value: f32, device: &Device) -> Tensor<1> {
        Tensor::from_data(TensorData::new(vec![value], [1]), (device, DType::F32))
    }

    /// The host's draws: about `keep` of them ones, the rest zeros; another key, another mask;
    /// the same key, the same mask. On the CPU backend `bernoulli` draws exactly these.
    #[test]
    fn draws_keep_their_probability_and_follow_the_key() {
        let n = 40_000u32;
        let a: Vec<f32> = (0..n).map(|p| draw(7, p, 0.95)).collect();
        assert!(a.iter().all(|&v| v == 0.0 || v == 1.0));
        let kept = a.iter().sum::<f32>() as f64 / n as f64;
        // 40,000 Bernoulli(0.95) draws: the standard error is 0.0011.
        assert!((kept - 0.95).abs() < 0.006, "kept {kept}");
        let b: Vec<f32> = (0..n).map(|p| draw(8, p, 0.95)).collect();
        let same = a.iter().zip(&b).filter(|(x, y)| x == y).count() as f64 / n as f64;
        // Independent masks agree where both keep or both drop: 0.95² + 0.05² = 0.905.
        assert!((same - 0.905).abs() < 0.01, "agreement {same}");
        let flex = f32_values(bernoulli(&counter(7.0, &Device::flex()), n as usize, 0.95));
        assert_eq!(flex, a);
    }

    /// On wgpu (llvmpipe in CI) the kernel draws the host's values bit for bit, keyed by the
    /// counter's value on the device.
    #[cfg(feature = "wgpu")]
    #[test]
    fn the_kernel_draws_the_hosts_values() {
        let device = crate::open_device("wgpu").expect("a wgpu adapter (CI installs llvmpipe)");
        for key in [0u32, 1, 12_345] {
            let got = f32_values(bernoulli(&counter(key as f32, &device), 70_001, 0.9));
            let want: Vec<f32> = (0..70_001).map(|p| draw(key, p, 0.9)).collect();
            assert_eq!(got, want, "key {key}");
        }
    }
}
