//! Rotary position embeddings in transformers' rotate-half form (pairs `i` and `i + d/2`), which
//! is how HF checkpoints store q/k rows. Frequencies are computed in f32 exactly as
//! `transformers.modeling_rope_utils` does (default, linear, llama3), then cos/sin per position.
//!
//! `rotate_half(x) · sin` is computed as `swap_halves(x) · [-sin, sin]`: the sine table holds
//! rotate-half's sign (its first half negated), so that the rotation is one flip of the two
//! halves (one kernel forward, one backward) instead of two slices, a negation and a
//! concatenation (whose backward allocates and fills a zero tensor per slice). The products are
//! the same floats: `(-x₂)·s` and `x₂·(-s)` round alike. Tables are laid out `[batch or 1, seq,
//! 1, head_dim]`, to broadcast over the heads of q and k as the projections produce them
//! (`[batch, seq, heads, head_dim]`), before they are transposed for attention.

use std::sync::Arc;

use burn::tensor::{Device, Int, Tensor, TensorData};

use crate::config::{LlamaConfig, RopeScaling};
use engram_ops::length_cache::LengthCache;

/// Inverse frequencies of the rotary embedding (`head_dim / 2` values).
pub fn inv_freq(config: &LlamaConfig) -> Vec<f32> {
    let dim = config.head_dim;
    let base = config.rope_theta as f32;
    // torch: 1.0 / (base ** (arange(0, dim, 2).float() / dim)), all in float32.
    let mut inv: Vec<f32> = (0..dim / 2)
        .map(|i| 1.0f32 / base.powf((2 * i) as f32 / dim as f32))
        .collect();
    match config.rope_scaling {
        RopeScaling::Default => {}
        RopeScaling::Linear { factor } => {
            for f in &mut inv {
                *f /= factor as f32;
            }
        }
        RopeScaling::Llama3 {
            factor,
            low_freq_factor,
            high_freq_factor,
            original_max_position_embeddings,
        } => {
            let (factor, low, high) = (
                factor as f32,
                low_freq_factor as f32,
                high_freq_factor as f32,
            );
            let old = original_max_position_embeddings as f32;
            let low_wavelen = old / low;
            let high_wavelen = old / high;
            for f in &mut inv {
                let wavelen = 2.0 * std::f32::consts::PI / *f;
                let scaled = if wavelen > low_wavelen {
                    *f / factor
                } else {
                    *f
                };
                let smooth = (old / wavelen - low) / (high - low);
                let smoothed = (1.0 - smooth) * scaled / factor + smooth * scaled;
                // HF: ~(wavelen < high_wavelen) * ~(wavelen > low_wavelen); wavelengths are finite.
                let medium = (high_wavelen..=low_wavelen).contains(&wavelen);
                *f = if medium { smoothed } else { scaled };
            }
        }
    }
    if let Some(factors) = &config.rope_freq_factors {
        for (f, d) in inv.iter_mut().zip(factors) {
            *f /= *d;
        }
    }
    inv
}

/// Tables kept per (device, length) for positions `0..t` (see [`Rotary::tables`]).
type TableCache = Arc<LengthCache<(Tensor<4>, Tensor<4>)>>;

/// Lengths whose `0..t` tables are kept per device (the oldest goes first): training batches
/// are length-bucketed, so a run sees a handful of lengths.
const CACHED_LENGTHS: usize = 32;

/// Rotary embedding: cos/sin tables computed on the host. When every row sits at the same
/// positions (training batches, unpadded forwards) one `[1, seq, 1, head_dim]` table serves the
/// batch by broadcasting, and the table of positions `0..seq` is kept on the device, so a
/// training step uploads none.
#[derive(Debug, Clone)]
pub struct Rotary {
    inv_freq: Vec<f32>,
    cache: TableCache,
}

impl Rotary {
    /// From the model config.
    pub fn new(config: &LlamaConfig) -> Self {
        Self {
            inv_freq: inv_freq(config),
            cache: Arc::new(LengthCache::new(CACHED_LENGTHS)),
        }
    }

    /// The inverse frequencies.
    pub fn inv_freq(&self) -> &[f32] {
        &self.inv_freq
    }

    /// cos and signed sin (see the module docs) for `positions[b][t]`: `[batch, seq, 1,
    /// head_dim]`, or `[1, seq, 1, head_dim]` when every row has the same positions.
    pub fn tables(&self, positions: &[Vec<usize>], device: &Device) -> (Tensor<4>, Tensor<4>) {
        let shared = positions.windows(2).all(|w| w[0] == w[1]);
        if !shared || positions.is_empty() {
            return self.compute(positions, device);
        }
        let row = &positions[0];
        let t = row.len();
        if t < 2 || row.iter().enumerate().any(|(i, &p)| p != i) {
            return self.compute(&positions[..1], device);
        }
        self.first(t, device)
    }

    /// The tables of positions `0..t`, `[1, t, 1, head_dim]`, kept on the device.
    fn first(&self, t: usize, device: &Device) -> (Tensor<4>, Tensor<4>) {
        self.cache.get_or_build(device, t, || {
            let positions: Vec<usize> = (0..t).collect();
            self.compute(&[positions], device)
        })
    }

    /// cos and signed sin for positions given as a device tensor `[batch, seq]` whose values are
    /// all below `bound`: `[batch, seq, 1, head_dim]`, gathered on the device from the kept table of
    /// `0..bound` (packed training rows, whose positions restart at every sequence), so that only
    /// the positions travel to the device. The values equal [`Rotary::tables`]'.
    pub fn gather(
        &self,
        positions: Tensor<2, Int>,
        bound: usize,
        device: &Device,
    ) -> (Tensor<4>, Tensor<4>) {
        let [b, t] = positions.dims();
        let (cos, sin) = self.first(bound, device);
        let hd = cos.dims()[3];
        let at = positions.reshape([b * t]);
        let pick = |table: Tensor<4>| {
            table
                .reshape([bound, hd])
                .select(0, at.clone())
                .reshape([b, t, 1, hd])
        };
        (pick(cos), pick(sin))
    }

    /// The tables of `positions`, one row per entry.
    fn compute(&self, positions: &[Vec<usize>], device: &Device) -> (Tensor<4>, Tensor<4>) {
        let b = positions.len();
        let t = positions.first().map_or(0, Vec::len);
        let half = self.inv_freq.len();
        let hd = 2 * half;
        let mut cos = Vec::with_capacity(b * t * hd);
        let mut sin = Vec::with_capacity(b * t * hd);
        for row in positions {
            for &p in row {
                let freqs: Vec<f32> = self.inv_freq.iter().map(|f| f * p as f32).collect();
                for sign in [-1.0f32, 1.0] {
                    cos.extend(freqs.iter().map(|x| x.cos()));
                    sin.extend(freqs.iter().map(|x| sign * x.sin()));
                }
            }
        }
        let shape = [b, t, 1, hd];
        (
            Tensor::from_data(TensorData::new(cos, shape), device),
            Tensor::from_data(TensorData::new(sin, shape), device),
        )
    }
}

/// `x * cos + rotate_half(x) * sin` for `x: [batch, seq, heads, head_dim]` (contiguous, as a
/// projection's output reshaped) and tables from [`Rotary`] (`sin` signed, `[batch or 1, seq,
/// 1, head_dim]`), as `x * cos + swap_halves(x) * sin` (in one pass on the CPU backend's
/// inference: [`engram_ops::rope::cpu::rotary`], the same bits).
pub fn apply_rotary(x: Tensor<4>, cos: &Tensor<4>, sin: &Tensor<4>) -> Tensor<4> {
    match engram_ops::rope::cpu::rotary(&x, cos, sin) {
        Some(y) => y,
        None => rotary_ops(x, cos, sin),
    }
}

/// [`apply_rotary`] in Burn ops (every backend): one operation whose backward is the rotation
/// by −θ ([`engram_ops::rope`]); its forward runs the ops of `engram_ops::rope::rotary_composed`,
/// in that order.
pub(crate) fn rotary_ops(x: Tensor<4>, cos: &Tensor<4>, sin: &Tensor<4>) -> Tensor<4> {
    engram_ops::rope::rotary(x, cos, sin)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn values(t: Tensor<4>) -> Vec<f32> {
        t.into_data().try_into_vec_as::<f32>().unwrap()
    }

    /// One layer, head_dim 8.
    fn small_config() -> LlamaConfig {
        LlamaConfig::from_hf_json(
            &serde_json::json!({
                "model_type": "llama", "hidden_size": 16, "intermediate_size": 32,
                "num_attention_heads": 2,
                "num_key_value_heads": 1, "num_hidden_layers": 1, "vocab_size": 10,
                "rms_norm_eps": 1e-5, "max_position_embeddings": 64, "rope_theta": 10000.0,
            }),
            "test",
        )
        .unwrap()
    }

    #[test]
    fn shared_positions_give_one_broadcast_row_equal_to_the_per_row_tables() {
        let r = Rotary::new(&small_config());
        let dev = Device::flex();
        let rows: Vec<Vec<usize>> = (0..3).map(|_| (0..5).collect()).collect();
        let (cos, sin) = r.tables(&rows, &dev);
        assert_eq!(cos.dims(), [1, 5, 1, 8]);
        let (pc, ps) = r.compute(&rows, &dev);
        assert_eq!(pc.dims(), [3, 5, 1, 8]);
        let (pc, ps) = (values(pc), values(ps));
        assert_eq!(values(cos.clone()), pc[..40].to_vec());
        assert_eq!(values(sin), ps[80..].to_vec());
        // Kept: the second call hands back the cached table.
        assert_eq!(r.cache.len(), 1);
        let (again, _) = r.tables(&rows, &dev);
        assert_eq!(values(again), values(cos));
        assert_eq!(r.cache.len(), 1);
        // Rows at other positions keep one table row each, and nothing is cached for them.
        let mixed = vec![vec![0, 1], vec![3, 4]];
        assert_eq!(r.tables(&mixed, &dev).0.dims(), [2, 2, 1, 8]);
        let shifted = vec![vec![3, 4], vec![3, 4]];
        assert_eq!(r.tables(&shifted, &dev).0.dims(), [1, 2, 1, 8]);
        assert_eq!(r.cache.len(), 1);
        // Gathered on the device: the same values as the host tables of those positions.
        let rows = vec![vec![0, 1, 2, 0, 1], vec![0, 1, 0, 1, 2]];
        let flat: Vec<i64> = rows.iter().flatten().map(|&p| p as i64).collect();
        let at = Tensor::<2, Int>::from_data(TensorData::new(flat, [2, 5]), &dev);
        let (gc, gs) = r.gather(at, 8, &dev);
        assert_eq!(gc.dims(), [2, 5, 1, 8]);
        let (hc, hs) = r.compute(&rows, &dev);
        assert_eq!(values(gc), values(hc));
        assert_eq!(values(gs), values(hs));
    }

    /// On the CPU backend's inference `apply_rotary` takes the one-pass path
    /// (`engram_ops::rope::cpu::rotary`): the ops' bits.
    #[test]
    fn apply_rotary_gives_the_ops_bits() {
        let _rng = crate::testing::train_lock();
        let device = Device::flex();
        device.seed(4);
        let (b, t, h, d) = (3, 5, 4, 16);
        let random = |shape: [usize; 4]| {
            Tensor::<4>::random(shape, burn::tensor::Distribution::Normal(0.0, 1.0), &device)
        };
        let x = random([b, t, h, d]);
        for cb in [1, b] {
            let (cos, sin) = (random([cb, t, 1, d]), random([cb, t, 1, d]));
            let want = values(rotary_ops(x.clone(), &cos, &sin));
            let got = values(apply_rotary(x.clone(), &cos, &sin));
            assert_eq!(
                got.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
                want.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
                "{cb}"
            );
        }
    }

    #[test]
    fn the_flip_is_rotate_half_bit_for_bit() {
        let r = Rotary::new(&small_config());
        let dev = Device::flex();
        let (b, t, h, d) = (2, 5, 2, 8);
        let x: Vec<f32> = (0..b * t * h * d)
            .map(|i| ((i * 37 % 101) as f32 - 50.0) / 7.0)
            .collect();
        let xt = Tensor::<4>::from_data(TensorData::new(x.clone(), [b, t, h, d]), &dev);
        let rows: Vec<Vec<usize>> = vec![(3..8).collect(), (0..5).collect()];
        let (cos, sin) = r.tables(&rows, &dev);
        let got = values(apply_rotary(xt, &cos, &sin));
        // transformers: q * cos + rotate_half(q) * sin, rotate_half(q) = cat(-q2, q1).
        let inv = r.inv_freq();
        let mut want = vec![0f32; x.len()];
        for (bi, row) in rows.iter().enumerate() {
            for (ti, &pos) in row.iter().enumerate() {
                for hi in 0..h {
                    let base = ((bi * t + ti) * h + hi) * d;
                    for j in 0..d {
                        let f = inv[j % (d / 2)] * pos as f32;
                        let rot = if j < d / 2 {
                            -x[base + j + d / 2]
                        } else {
                            x[base + j - d / 2]
                        };
                        want[base + j] = x[base + j] * f.cos() + rot * f.sin();
                    }
                }
            }
        }
        assert_eq!(got, want);
    }
}
