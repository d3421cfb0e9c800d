//! Rotary position embeddings in transformers' rotate-half form (pairs `i` and `i + d/2`), which
//! is how HF checkpoints store q/k rows. Frequencies are computed in f32 exactly as
//! `transformers.modeling_rope_utils` does (default, linear, llama3), then cos/sin per position.

use burn::tensor::{Device, Tensor, TensorData};

use crate::config::{LlamaConfig, RopeScaling};

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

/// Rotary embedding: cos/sin tables computed on the host for the positions of each call.
#[derive(Debug, Clone)]
pub struct Rotary {
    inv_freq: Vec<f32>,
}

impl Rotary {
    /// From the model config.
    pub fn new(config: &LlamaConfig) -> Self {
        Self {
            inv_freq: inv_freq(config),
        }
    }

    /// The inverse frequencies.
    pub fn inv_freq(&self) -> &[f32] {
        &self.inv_freq
    }

    /// cos and sin, each `[batch, 1, seq, head_dim]`, for `positions[b][t]`.
    pub fn tables(&self, positions: &[Vec<usize>], device: &Device) -> (Tensor<4>, Tensor<4>) {
        let b = positions.len();
        let t = positions.first().map_or(0, Vec::len);
        let half = self.inv_freq.len();
        let hd = 2 * half;
        let mut cos = Vec::with_capacity(b * t * hd);
        let mut sin = Vec::with_capacity(b * t * hd);
        for row in positions {
            for &p in row {
                let freqs: Vec<f32> = self.inv_freq.iter().map(|f| f * p as f32).collect();
                for _ in 0..2 {
                    cos.extend(freqs.iter().map(|x| x.cos()));
                    sin.extend(freqs.iter().map(|x| x.sin()));
                }
            }
        }
        let shape = [b, 1, t, hd];
        (
            Tensor::from_data(TensorData::new(cos, shape), device),
            Tensor::from_data(TensorData::new(sin, shape), device),
        )
    }
}

/// `x * cos + rotate_half(x) * sin` for `x: [batch, heads, seq, head_dim]`.
pub fn apply_rotary(x: Tensor<4>, cos: &Tensor<4>, sin: &Tensor<4>) -> Tensor<4> {
    let hd = x.dims()[3];
    let half = hd / 2;
    let x1 = x.clone().narrow(3, 0, half);
    let x2 = x.clone().narrow(3, half, half);
    let rotated = Tensor::cat(vec![x2.neg(), x1], 3);
    let dtype = x.dtype();
    x * cos.clone().cast(dtype) + rotated * sin.clone().cast(dtype)
}
