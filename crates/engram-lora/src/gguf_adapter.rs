//! A PEFT adapter written as llama.cpp's LoRA adapter GGUF (what its `convert_lora_to_gguf.py`
//! writes and `llama-server --lora` / Ollama's `ADAPTER` read): `general.type = adapter`,
//! `adapter.type = lora`, `adapter.lora.alpha`, and per adapted weight `blk.N.<module>.weight`
//! a pair `….lora_a` (`[r, in]`, GGUF dims `in, r`) and `….lora_b` (`[out, r]`, GGUF dims
//! `r, out`). llama.cpp's llama weights carry q and k with the rows of each head interleaved
//! (its converter's permutation); `lora_b` of q and k is permuted the same way, so that the
//! adapter's delta lines up with the base weights llama.cpp holds. Qwen2 and Qwen3 bases keep HF's
//! row order in llama.cpp, and so do their adapters.
//!
//! llama.cpp scales a delta by `alpha / r` (times the adapter scale the user gives, 1 by
//! default); the alpha written is PEFT's scaling × r, so the delta is PEFT's also under rsLoRA.

use std::path::Path;

use engram_checkpoint::gguf::{GgufValue, GgufWriter, WriterTensor, permute_rows};
use engram_checkpoint::{FloatFormat, encode_f32};
use engram_model::LoraTarget;
use serde_json::Value;

use crate::error::{LoraError, Result};
use crate::peft::{PeftAdapter, PeftFactors};

/// The float type of the adapter's tensors.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GgufAdapterType {
    /// 32-bit floats: the adapter exactly.
    F32,
    /// 16-bit floats (llama.cpp's converter's default).
    F16,
}

impl GgufAdapterType {
    fn format_and_id(self) -> (FloatFormat, u32) {
        match self {
            GgufAdapterType::F32 => (FloatFormat::F32, 0),
            GgufAdapterType::F16 => (FloatFormat::F16, 1),
        }
    }
}

/// What was written.
#[derive(Debug, Clone, PartialEq)]
pub struct GgufAdapterSummary {
    /// Tensors written (two per adapted weight).
    pub tensors: usize,
    /// The `adapter.lora.alpha` written (PEFT's scaling × rank).
    pub alpha: f64,
    /// Bytes of the file.
    pub bytes: usize,
}

/// The GGUF module name of `target` (`blk.N.<module>.weight`).
pub fn gguf_module(target: LoraTarget) -> &'static str {
    match target {
        LoraTarget::Q => "attn_q",
        LoraTarget::K => "attn_k",
        LoraTarget::V => "attn_v",
        LoraTarget::O => "attn_output",
        LoraTarget::Gate => "ffn_gate",
        LoraTarget::Up => "ffn_up",
        LoraTarget::Down => "ffn_down",
    }
}

/// The GGUF name of the weight `f` adapts: `blk.N.<module>.weight`.
pub(crate) fn gguf_weight(f: &PeftFactors) -> String {
    format!("blk.{}.{}.weight", f.layer, gguf_module(f.target))
}

/// The base model's shape, as its `config.json` (or a GGUF file's equivalent) gives it: what
/// an adapter is checked against, and the heads llama.cpp's q/k row permutation runs over.
pub(crate) struct BaseShape {
    /// llama.cpp's name of the architecture (`general.architecture`).
    arch: String,
    layers: usize,
    heads: usize,
    kv_heads: usize,
    hidden: usize,
    head_dim: usize,
    intermediate: usize,
}

impl BaseShape {
    /// The shape `config` (read from `origin`) gives; a named error unless it is a llama or
    /// qwen2 model.
    pub(crate) fn of(config: &Value, origin: &str) -> Result<Self> {
        let get = |k: &str| config.get(k).and_then(Value::as_u64).map(|v| v as usize);
        let need = |k: &str| {
            get(k).ok_or_else(|| {
                LoraError::adapter(origin, format!("the base model's config has no `{k}`"))
            })
        };
        let model_type = config
            .get("model_type")
            .and_then(Value::as_str)
            .unwrap_or("");
        // llama.cpp converts Mistral checkpoints to its `llama` architecture (q/k permuted).
        let model_type = if model_type == "mistral" {
            "llama"
        } else {
            model_type
        };
        if !engram_checkpoint::gguf::GGUF_ARCHITECTURES.contains(&model_type) {
            return Err(LoraError::adapter(
                origin,
                format!(
                    "the base model is `{model_type}`; llama.cpp adapters are written for {} models",
                    engram_checkpoint::gguf::GGUF_ARCHITECTURES.join(", ")
                ),
            ));
        }
        let heads = need("num_attention_heads")?;
        let hidden = need("hidden_size")?;
        Ok(Self {
            arch: model_type.to_string(),
            layers: need("num_hidden_layers")?,
            heads,
            kv_heads: get("num_key_value_heads").unwrap_or(heads),
            hidden,
            head_dim: get("head_dim").unwrap_or(hidden / heads.max(1)),
            intermediate: need("intermediate_size")?,
        })
    }

    /// `(in, out)` of `target`'s weight.
    fn dims(&self, target: LoraTarget) -> (usize, usize) {
        let (q, kv) = (self.heads * self.head_dim, self.kv_heads * self.head_dim);
        match target {
            LoraTarget::Q => (self.hidden, q),
            LoraTarget::K | LoraTarget::V => (self.hidden, kv),
            LoraTarget::O => (q, self.hidden),
            LoraTarget::Gate | LoraTarget::Up => (self.hidden, self.intermediate),
            LoraTarget::Down => (self.intermediate, self.hidden),
        }
    }

    /// Every factor of `adapter` against this shape (the base read from `origin`).
    pub(crate) fn check(&self, adapter: &PeftAdapter, origin: &str) -> Result<()> {
        for f in &adapter.factors {
            let want = self.dims(f.target);
            if f.layer >= self.layers || (f.d_in, f.d_out) != want {
                return Err(LoraError::adapter(
                    &adapter.path,
                    format!(
                        "layer {} {}: the adapter is for a {}→{} weight, {origin} has {} (a {}-layer model): made for another base model?",
                        f.layer,
                        f.target.path(),
                        f.d_in,
                        f.d_out,
                        if f.layer < self.layers {
                            format!("{}→{}", want.0, want.1)
                        } else {
                            "no such layer".to_string()
                        },
                        self.layers
                    ),
                ));
            }
        }
        Ok(())
    }

    /// `rows` (of `cols` values each, HF's row order) of an output of `target` in llama.cpp's
    /// order: for `llama`, q's and k's heads with their rotate-half rows interleaved (llama.cpp's
    /// converter permutes them); everything else, and every row of a Qwen model, as it is.
    pub(crate) fn llama_cpp_rows(
        &self,
        target: LoraTarget,
        values: Vec<f32>,
        rows: usize,
        cols: usize,
    ) -> Vec<f32> {
        match target {
            _ if self.arch != "llama" => values,
            LoraTarget::Q => permute_rows(&values, rows, cols, self.heads),
            LoraTarget::K => permute_rows(&values, rows, cols, self.kv_heads),
            _ => values,
        }
    }
}

/// An error unless `out` is free or `force` lets it be replaced.
pub(crate) fn refuse_existing(out: &Path, force: bool) -> Result<()> {
    if out.exists() && !force {
        return Err(LoraError::adapter(
            out,
            "exists; pass --force to replace it",
        ));
    }
    Ok(())
}

/// Writes `adapter` for the base model whose config is `base_config` (from `base_origin`) as a
/// llama.cpp LoRA adapter GGUF at `out`, atomically. Every adapted weight is checked against
/// the base's shape before anything is written; an existing `out` is refused unless `force`.
pub fn write_gguf_adapter(
    adapter: &PeftAdapter,
    base_config: &Value,
    base_origin: &str,
    out: &Path,
    ty: GgufAdapterType,
    force: bool,
) -> Result<GgufAdapterSummary> {
    refuse_existing(out, force)?;
    let base = BaseShape::of(base_config, base_origin)?;
    base.check(adapter, base_origin)?;
    let alpha = adapter.config.scaling() * adapter.config.rank as f64;
    let (format, type_id) = ty.format_and_id();
    let mut w = GgufWriter::new();
    w.meta("general.architecture", GgufValue::String(base.arch.clone()))
        .meta("general.type", GgufValue::String("adapter".into()))
        .meta("adapter.type", GgufValue::String("lora".into()))
        .meta("adapter.lora.alpha", GgufValue::F64(alpha));
    if let Some(b) = &adapter.base_model {
        w.meta("general.base_model.0.name", GgufValue::String(b.clone()));
    }
    for f in &adapter.factors {
        let name = gguf_weight(f);
        let b = base.llama_cpp_rows(f.target, f.b.clone(), f.d_out, f.rank);
        w.tensor(WriterTensor {
            name: format!("{name}.lora_a"),
            shape: vec![f.rank, f.d_in],
            type_id,
            data: encode_f32(&f.a, format),
        });
        w.tensor(WriterTensor {
            name: format!("{name}.lora_b"),
            shape: vec![f.d_out, f.rank],
            type_id,
            data: encode_f32(&b, format),
        });
    }
    let bytes = w.to_bytes();
    engram_io::write_file(out, &bytes).map_err(|e| LoraError::adapter(out, e.to_string()))?;
    Ok(GgufAdapterSummary {
        tensors: adapter.factors.len() * 2,
        alpha,
        bytes: bytes.len(),
    })
}
