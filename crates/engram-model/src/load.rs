//! Building a [`Llama`] from a checkpoint — every tensor read, shape-checked against the config
//! and moved to the device one at a time — or with random weights drawn on the device itself
//! (benchmarks of any architecture without downloading it).

use std::sync::Arc;

use burn::module::Param;
use burn::tensor::{DType, Device, Distribution, Tensor, TensorData};
use engram_checkpoint::{Checkpoint, FloatFormat, HostTensor, TensorSource};
use engram_kernels::QuantizedMatrix;

use crate::attention::Attention;
use crate::block::DecoderLayer;
use crate::config::LlamaConfig;
use crate::error::{ModelError, Result};
use crate::linear::Linear;
use crate::llama::Llama;
use crate::mlp::Mlp;
use crate::norm::RmsNorm;
use crate::rope::Rotary;

/// The float type weights are held in on the device.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum WeightDType {
    /// f32 (default; exact parity with transformers' f32 path).
    #[default]
    F32,
    /// bfloat16.
    BF16,
    /// float16.
    F16,
}

impl WeightDType {
    /// Burn's dtype.
    pub fn dtype(self) -> DType {
        match self {
            WeightDType::F32 => DType::F32,
            WeightDType::BF16 => DType::BF16,
            WeightDType::F16 => DType::F16,
        }
    }

    /// Parses "f32", "bf16" or "f16".
    pub fn parse(s: &str) -> Option<Self> {
        match s.to_ascii_lowercase().as_str() {
            "f32" | "float32" | "fp32" => Some(Self::F32),
            "bf16" | "bfloat16" => Some(Self::BF16),
            "f16" | "float16" | "fp16" | "half" => Some(Self::F16),
            _ => None,
        }
    }
}

/// Where the weights come from.
enum Weights<'a> {
    /// A checkpoint's tensors.
    Checkpoint(&'a dyn TensorSource),
    /// Normal(0, `std`) draws on the device (norm weights 1), as transformers initializes.
    Random { std: f64 },
}

struct Loader<'a> {
    src: Weights<'a>,
    device: &'a Device,
    dtype: DType,
}

fn burn_dtype(f: FloatFormat) -> DType {
    match f {
        FloatFormat::F32 => DType::F32,
        FloatFormat::F16 => DType::F16,
        FloatFormat::BF16 => DType::BF16,
    }
}

/// Transposes a row-major `[rows, cols]` matrix of `elem`-byte elements.
fn transpose_bytes(src: &[u8], rows: usize, cols: usize, elem: usize) -> Vec<u8> {
    let mut out = vec![0u8; src.len()];
    const TILE: usize = 32;
    for r0 in (0..rows).step_by(TILE) {
        for c0 in (0..cols).step_by(TILE) {
            for r in r0..(r0 + TILE).min(rows) {
                for c in c0..(c0 + TILE).min(cols) {
                    let s = (r * cols + c) * elem;
                    let d = (c * rows + r) * elem;
                    out[d..d + elem].copy_from_slice(&src[s..s + elem]);
                }
            }
        }
    }
    out
}

/// The largest weight tensor a GPU backend holds for `config` in `dtype`, and its bytes: the
/// embedding (and head), or a projection joined on the GPU backends (q/k/v, gate/up), each one
/// buffer (the others are smaller).
fn largest_weight(config: &LlamaConfig, dtype: DType) -> Option<(String, u64)> {
    let c = config;
    let (h, i, v) = (c.hidden_size, c.intermediate_size, c.vocab_size);
    let q = c.num_attention_heads * c.head_dim;
    let kv = c.num_key_value_heads * c.head_dim;
    let layers = c.num_hidden_layers > 0;
    [
        ("model.embed_tokens.weight".to_string(), v * h),
        (
            "model.layers.*.self_attn.q_proj + k_proj + v_proj (joined)".to_string(),
            if layers { h * (q + 2 * kv) } else { 0 },
        ),
        (
            "model.layers.*.mlp.gate_proj + up_proj (joined)".to_string(),
            if layers { h * 2 * i } else { 0 },
        ),
    ]
    .into_iter()
    .max_by_key(|(_, n)| *n)
    .map(|(name, n)| (name, (n * dtype.size()) as u64))
}

impl Loader<'_> {
    /// The checkpoint's tensors (the random source has none).
    fn source(&self) -> &dyn TensorSource {
        match self.src {
            Weights::Checkpoint(src) => src,
            Weights::Random { .. } => unreachable!("random weights are drawn, not read"),
        }
    }

    /// Random weights of `shape` in `dtype`, if the weights are random.
    fn random<const D: usize>(&self, shape: [usize; D], dtype: DType) -> Option<Tensor<D>> {
        match self.src {
            Weights::Random { std } => Some(Tensor::random(
                shape,
                Distribution::Normal(0.0, std),
                (self.device, dtype),
            )),
            Weights::Checkpoint(_) => None,
        }
    }

    fn host(&self, name: &str, expected: &[usize]) -> Result<HostTensor> {
        let src = self.source();
        let info = src.info(name).ok_or_else(|| {
            ModelError::Checkpoint(engram_checkpoint::CheckpointError::MissingTensor {
                name: name.to_string(),
                origin: src.origin(),
            })
        })?;
        if info.shape != expected {
            return Err(ModelError::WrongShape {
                origin: src.origin(),
                name: name.to_string(),
                found: info.shape,
                expected: expected.to_vec(),
            });
        }
        Ok(src.read(name)?)
    }

    /// Moves host bytes of `format` and `shape` to the device as `dtype`.
    fn upload<const D: usize>(
        &self,
        bytes: Vec<u8>,
        format: FloatFormat,
        shape: [usize; D],
        dtype: DType,
    ) -> Tensor<D> {
        let data = TensorData::from_bytes_vec(bytes, shape, burn_dtype(format));
        Tensor::from_data(data, (self.device, dtype))
    }

    fn tensor<const D: usize>(&self, name: &str, expected: [usize; D]) -> Result<Tensor<D>> {
        if let Some(t) = self.random(expected, self.dtype) {
            return Ok(t);
        }
        let h = self.host(name, &expected)?;
        Ok(self.upload(h.bytes, h.format, expected, self.dtype))
    }

    fn opt_tensor<const D: usize>(
        &self,
        name: &str,
        expected: [usize; D],
        want: bool,
    ) -> Result<Option<Tensor<D>>> {
        let present = match self.src {
            Weights::Checkpoint(src) => src.info(name).is_some(),
            Weights::Random { .. } => false,
        };
        if want || present {
            self.tensor(name, expected).map(Some)
        } else {
            Ok(None)
        }
    }

    fn linear(&self, prefix: &str, d_in: usize, d_out: usize, bias: bool) -> Result<Linear> {
        if let Some(w) = self.random([d_in, d_out], self.dtype) {
            let b = bias.then(|| Tensor::zeros([d_out], (self.device, self.dtype)));
            return Ok(Linear::from_in_out(w, b));
        }
        let h = self.host(&format!("{prefix}.weight"), &[d_out, d_in])?;
        // Transposed on the host, once: a lazily transposed weight would be re-materialized by
        // the backend on every matmul.
        let bytes = transpose_bytes(&h.bytes, d_out, d_in, h.format.size());
        let w = self.upload(bytes, h.format, [d_in, d_out], self.dtype);
        let b = self.opt_tensor(&format!("{prefix}.bias"), [d_out], bias)?;
        let mut linear = Linear::from_in_out(w, b);
        linear.quantized = self.quantized(&format!("{prefix}.weight"))?;
        Ok(linear)
    }

    /// The quantized blocks of `name` (already shape-checked) where the CPU kernel may read
    /// them; `None` elsewhere and for float tensors.
    fn quantized(&self, name: &str) -> Result<Option<Arc<QuantizedMatrix>>> {
        match self.src {
            Weights::Checkpoint(src)
                if crate::cpu_matmul::keeps_blocks(self.device, self.dtype) =>
            {
                Ok(src.read_quantized(name)?.map(Arc::new))
            }
            _ => Ok(None),
        }
    }

    fn norm(&self, name: &str, h: usize, eps: f64) -> Result<RmsNorm> {
        // In the model's dtype, as transformers loads it (the norm's statistics are f32
        // whatever the weight's dtype, and it scales the normalized value in the input dtype):
        // an f32 weight would be cast to the model's dtype at every use, a launch of its own
        // on the GPU backends, for the same bits.
        if let Weights::Random { .. } = self.src {
            return Ok(RmsNorm::new(
                Tensor::ones([h], (self.device, self.dtype)),
                eps,
            ));
        }
        let host = self.host(name, &[h])?;
        let weight = self.upload(host.bytes, host.format, [h], self.dtype);
        Ok(RmsNorm::new(weight, eps))
    }
}

impl Llama {
    /// Loads a model from an opened checkpoint onto `device`, weights in `dtype`.
    pub fn load(ckpt: &Checkpoint, dtype: WeightDType, device: &Device) -> Result<Self> {
        let mut config = LlamaConfig::from_hf_json(&ckpt.config, &ckpt.config_origin)?;
        config.rope_freq_factors = ckpt.rope_freq_factors.clone();
        if let Some(f) = &config.rope_freq_factors
            && f.len() != config.head_dim / 2
        {
            return Err(ModelError::WrongShape {
                origin: ckpt.origin.clone(),
                name: "rope_freqs.weight".into(),
                found: vec![f.len()],
                expected: vec![config.head_dim / 2],
            });
        }
        Self::load_from(ckpt.tensors.as_ref(), config, dtype, device)
    }

    /// Loads from any tensor source with a given config.
    pub fn load_from(
        src: &dyn TensorSource,
        config: LlamaConfig,
        dtype: WeightDType,
        device: &Device,
    ) -> Result<Self> {
        Self::build(Weights::Checkpoint(src), config, dtype, device)
    }

    /// A model of `config` with random weights drawn on `device` in `dtype` (Normal(0, 0.02),
    /// as transformers initializes; norms 1) from the device RNG seeded with `seed` — for
    /// benchmarking an architecture without its checkpoint.
    pub fn random(
        config: LlamaConfig,
        dtype: WeightDType,
        device: &Device,
        seed: u64,
    ) -> Result<Self> {
        device.seed(seed);
        Self::build(Weights::Random { std: 0.02 }, config, dtype, device)
    }

    fn build(
        src: Weights<'_>,
        config: LlamaConfig,
        dtype: WeightDType,
        device: &Device,
    ) -> Result<Self> {
        if !device.supports_dtype(dtype.dtype()) {
            return Err(ModelError::UnsupportedDtype {
                dtype: format!("{dtype:?}").to_lowercase(),
                device: crate::device::describe(device),
            });
        }
        if let Some(max) = crate::device::max_buffer_bytes(device)
            && let Some((tensor, bytes)) = largest_weight(&config, dtype.dtype())
            && bytes > max
        {
            return Err(ModelError::BufferTooLarge {
                tensor,
                bytes,
                dtype: format!("{dtype:?}").to_lowercase(),
                device: crate::device::describe(device),
                max,
            });
        }
        let l = Loader {
            src,
            device,
            dtype: dtype.dtype(),
        };
        let c = &config;
        let (h, i) = (c.hidden_size, c.intermediate_size);
        let q = c.num_attention_heads * c.head_dim;
        let kv = c.num_key_value_heads * c.head_dim;
        let embed = l.tensor("model.embed_tokens.weight", [c.vocab_size, h])?;
        let mut layers = Vec::with_capacity(c.num_hidden_layers);
        for n in 0..c.num_hidden_layers {
            let p = format!("model.layers.{n}");
            let (qkv_b, o_b, mb) = (c.qkv_bias, c.o_bias, c.mlp_bias);
            layers.push(DecoderLayer {
                input_layernorm: l.norm(
                    &format!("{p}.input_layernorm.weight"),
                    h,
                    c.rms_norm_eps,
                )?,
                self_attn: Attention {
                    q_proj: l.linear(&format!("{p}.self_attn.q_proj"), h, q, qkv_b)?,
                    k_proj: l.linear(&format!("{p}.self_attn.k_proj"), h, kv, qkv_b)?,
                    v_proj: l.linear(&format!("{p}.self_attn.v_proj"), h, kv, qkv_b)?,
                    o_proj: l.linear(&format!("{p}.self_attn.o_proj"), q, h, o_b)?,
                    n_heads: c.num_attention_heads,
                    n_kv_heads: c.num_key_value_heads,
                    head_dim: c.head_dim,
                    q_norm: c
                        .qk_norm
                        .then(|| {
                            l.norm(
                                &format!("{p}.self_attn.q_norm.weight"),
                                c.head_dim,
                                c.rms_norm_eps,
                            )
                        })
                        .transpose()?,
                    k_norm: c
                        .qk_norm
                        .then(|| {
                            l.norm(
                                &format!("{p}.self_attn.k_norm.weight"),
                                c.head_dim,
                                c.rms_norm_eps,
                            )
                        })
                        .transpose()?,
                    qkv: None,
                },
                post_attention_layernorm: l.norm(
                    &format!("{p}.post_attention_layernorm.weight"),
                    h,
                    c.rms_norm_eps,
                )?,
                mlp: Mlp {
                    gate_proj: l.linear(&format!("{p}.mlp.gate_proj"), h, i, mb)?,
                    up_proj: l.linear(&format!("{p}.mlp.up_proj"), h, i, mb)?,
                    down_proj: l.linear(&format!("{p}.mlp.down_proj"), i, h, mb)?,
                    gate_up: None,
                },
            });
        }
        for layer in &mut layers {
            // On the GPU backends q, k and v's weights are one (gate and up's too).
            layer.self_attn.join_projections();
            layer.mlp.join_projections();
        }
        let norm = l.norm("model.norm.weight", h, c.rms_norm_eps)?;
        let (lm_head, embed_quantized) = if c.tie_word_embeddings {
            (None, l.quantized("model.embed_tokens.weight")?)
        } else {
            (Some(l.linear("lm_head", h, c.vocab_size, false)?), None)
        };
        Ok(Llama {
            embed_tokens: Param::from_tensor(embed),
            layers,
            norm,
            lm_head,
            rotary: Rotary::new(&config),
            config,
            embed_quantized,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::transpose_bytes;

    #[test]
    fn transposes_any_element_size() {
        let m: Vec<u8> = (0..6u8).collect(); // [[0,1,2],[3,4,5]] of 1-byte elements
        assert_eq!(transpose_bytes(&m, 2, 3, 1), vec![0, 3, 1, 4, 2, 5]);
        let w: Vec<u8> = (0..12u8).collect(); // 2x3 of 2-byte elements
        assert_eq!(
            transpose_bytes(&w, 2, 3, 2),
            vec![0, 1, 6, 7, 2, 3, 8, 9, 4, 5, 10, 11]
        );
        let big: Vec<u8> = (0..(70 * 45)).map(|x| (x % 251) as u8).collect();
        let t = transpose_bytes(&big, 70, 45, 1);
        assert_eq!(transpose_bytes(&t, 45, 70, 1), big);
    }
}

#[cfg(all(test, feature = "wgpu"))]
mod wgpu_tests {
    use super::*;

    fn tiny_config() -> LlamaConfig {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../tests/fixtures/tiny-f32/config.json"
        );
        let v: serde_json::Value = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
        LlamaConfig::from_hf_json(&v, path).unwrap()
    }

    /// A weight larger than the device holds in one buffer is refused by name before anything
    /// is drawn or read: the embedding, or gate/up's joined weight where each half would fit.
    #[test]
    fn a_weight_larger_than_one_device_buffer_is_refused_before_loading() {
        let device = crate::open_device("wgpu").unwrap();
        let max = crate::device::max_buffer_bytes(&device).expect("a CubeCL device") as usize;
        let h = tiny_config().hidden_size;
        let mut wide = tiny_config();
        wide.vocab_size = max / (h * 4) + 1;
        let mut mlp = tiny_config();
        mlp.intermediate_size = max / (h * 4) * 3 / 4;
        for (cfg, tensor) in [
            (wide, "model.embed_tokens.weight"),
            (mlp, "model.layers.*.mlp.gate_proj + up_proj (joined)"),
        ] {
            let Err(e) = Llama::random(cfg, WeightDType::F32, &device, 0) else {
                panic!("{tensor}: should be refused")
            };
            let text = e.to_string();
            assert!(
                matches!(&e, ModelError::BufferTooLarge { tensor: t, max: m, .. } if t == tensor && *m == max as u64),
                "{text}"
            );
            assert!(
                text.starts_with(tensor) && text.contains("llvmpipe"),
                "{text}"
            );
        }
        // The tiny model itself fits.
        assert!(Llama::random(tiny_config(), WeightDType::F32, &device, 0).is_ok());
    }
}
