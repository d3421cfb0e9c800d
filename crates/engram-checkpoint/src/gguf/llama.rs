//! A GGUF file of the `llama`, `qwen2` or `qwen3` architecture seen as an HF checkpoint: HF tensor
//! names, HF row order for q/k (llama.cpp's permutation of `llama` files undone; `qwen2`/`qwen3`
//! files keep HF's order), and an HF-style `config.json`,
//! `tokenizer.json` and `tokenizer_config.json` synthesized from the metadata (see
//! [`super::hf_config`], [`super::hf_tokenizer`], [`super::permute`]).

use std::collections::BTreeMap;
use std::path::Path;

use engram_kernels::QuantizedMatrix;
use serde_json::Value;

use super::dequant::{GgmlType, ggml_type_name};
use super::file::GgufFile;
use super::hf_config::{generation_config, synthesize_config};
use super::hf_tokenizer::{synthesize_tokenizer, tokenizer_config};
use super::permute::unpermute_rows;
use crate::tensor_source::{TensorInfo, TensorSource};

use crate::{CheckpointError, FloatFormat, HostTensor, Result};

/// How a tensor's rows must be reordered from llama.cpp's layout to HF's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum RowOrder {
    AsIs,
    /// Undo `permute(w, n_head)` of llama.cpp's converter for this many heads.
    Unpermute(usize),
}

/// The GGUF architectures engram reads (`general.architecture`).
pub const GGUF_ARCHITECTURES: [&str; 3] = ["llama", "qwen2", "qwen3"];

/// A llama-, qwen2- or qwen3-architecture GGUF checkpoint.
pub struct GgufLlama {
    file: GgufFile,
    /// HF name -> (GGUF name, row order).
    names: BTreeMap<String, (String, RowOrder)>,
    config: Value,
}

fn hf_name(gguf: &str) -> Option<String> {
    let direct = match gguf {
        "token_embd.weight" => Some("model.embed_tokens.weight"),
        "output_norm.weight" => Some("model.norm.weight"),
        "output.weight" => Some("lm_head.weight"),
        _ => None,
    };
    if let Some(n) = direct {
        return Some(n.to_string());
    }
    let rest = gguf.strip_prefix("blk.")?;
    let (layer, rest) = rest.split_once('.')?;
    let layer: usize = layer.parse().ok()?;
    let (module, suffix) = rest.rsplit_once('.')?;
    let hf = match module {
        "attn_norm" => "input_layernorm",
        "ffn_norm" => "post_attention_layernorm",
        "attn_q" => "self_attn.q_proj",
        "attn_k" => "self_attn.k_proj",
        "attn_v" => "self_attn.v_proj",
        "attn_output" => "self_attn.o_proj",
        "attn_q_norm" => "self_attn.q_norm",
        "attn_k_norm" => "self_attn.k_norm",
        "ffn_gate" => "mlp.gate_proj",
        "ffn_up" => "mlp.up_proj",
        "ffn_down" => "mlp.down_proj",
        _ => return None,
    };
    Some(format!("model.layers.{layer}.{hf}.{suffix}"))
}

impl GgufLlama {
    /// Opens `path`; fails with a named error unless `general.architecture` is one of
    /// [`GGUF_ARCHITECTURES`].
    pub fn open(path: &Path) -> Result<Self> {
        let file = GgufFile::open(path)?;
        let arch = file
            .meta("general.architecture")?
            .as_str()
            .unwrap_or("")
            .to_string();
        if !GGUF_ARCHITECTURES.contains(&arch.as_str()) {
            return Err(CheckpointError::BadKey {
                origin: path.display().to_string(),
                key: "general.architecture".into(),
                problem: format!(
                    "is `{arch}`; engram reads {} GGUF files",
                    GGUF_ARCHITECTURES.join(", ")
                ),
            });
        }
        // llama.cpp's converter interleaves q/k rows for `llama` only.
        let permuted = arch == "llama";
        let config = synthesize_config(&file, &arch)?;
        let heads = config["num_attention_heads"].as_u64().unwrap_or(1) as usize;
        let kv_heads = config["num_key_value_heads"].as_u64().unwrap_or(1) as usize;
        let mut names = BTreeMap::new();
        for g in file.tensors.keys() {
            let Some(hf) = hf_name(g) else { continue };
            let order = if !permuted {
                RowOrder::AsIs
            } else if hf.contains("self_attn.q_proj") {
                RowOrder::Unpermute(heads)
            } else if hf.contains("self_attn.k_proj") {
                RowOrder::Unpermute(kv_heads)
            } else {
                RowOrder::AsIs
            };
            names.insert(hf, (g.clone(), order));
        }
        Ok(Self {
            file,
            names,
            config,
        })
    }

    /// The HF-style `config.json` (as transformers builds it from the same metadata). Tied
    /// embeddings when the file has no `output.weight`.
    pub fn config(&self) -> &Value {
        &self.config
    }

    /// Per-frequency rope divisors (`rope_freqs.weight`, written by llama.cpp for llama3 rope
    /// scaling), when present.
    pub fn rope_freq_factors(&self) -> Result<Option<Vec<f32>>> {
        if self.file.tensors.contains_key("rope_freqs.weight") {
            self.file.read_f32("rope_freqs.weight").map(Some)
        } else {
            Ok(None)
        }
    }

    /// The underlying file (metadata access).
    pub fn file(&self) -> &GgufFile {
        &self.file
    }

    /// An HF `tokenizer.json` equivalent built from the `tokenizer.ggml.*` metadata (gpt2-style
    /// byte-level BPE). Control and user-defined tokens become special added tokens, as llama.cpp
    /// treats them; the pre-tokenizer follows `tokenizer.ggml.pre`.
    pub fn tokenizer_json(&self) -> Result<Value> {
        synthesize_tokenizer(&self.file)
    }

    /// An HF `tokenizer_config.json` equivalent: chat template, bos/eos/pad tokens.
    pub fn tokenizer_config(&self) -> Result<Value> {
        tokenizer_config(&self.file)
    }

    /// `generation_config.json` equivalent: the eos id(s) the file names.
    pub fn generation_config(&self) -> Value {
        generation_config(&self.file)
    }
}

impl GgufLlama {
    /// The GGUF name and row order of HF tensor `name`.
    fn entry(&self, name: &str) -> Result<(&str, RowOrder)> {
        let (g, order) = self
            .names
            .get(name)
            .ok_or_else(|| CheckpointError::MissingTensor {
                name: name.to_string(),
                origin: self.origin(),
            })?;
        Ok((g, *order))
    }

    /// `values` (rows of `cols` elements) in HF row order.
    fn hf_rows<T: Copy + Default>(
        &self,
        g: &str,
        order: RowOrder,
        values: Vec<T>,
        rows: usize,
        cols: usize,
    ) -> Result<Vec<T>> {
        let RowOrder::Unpermute(heads) = order else {
            return Ok(values);
        };
        if heads == 0 || !rows.is_multiple_of(heads) || !(rows / heads).is_multiple_of(2) {
            return Err(CheckpointError::BadKey {
                origin: self.origin(),
                key: g.to_string(),
                problem: format!("has {rows} rows, not a multiple of 2 x {heads} heads"),
            });
        }
        Ok(unpermute_rows(&values, rows, cols, heads))
    }
}

impl TensorSource for GgufLlama {
    fn origin(&self) -> String {
        self.file.path().display().to_string()
    }

    fn names(&self) -> Vec<String> {
        self.names.keys().cloned().collect()
    }

    fn info(&self, name: &str) -> Option<TensorInfo> {
        let (g, _) = self.names.get(name)?;
        let t = &self.file.tensors[g];
        Some(TensorInfo {
            shape: t.hf_shape(),
            stored_as: ggml_type_name(t.type_id).to_string(),
        })
    }

    fn read(&self, name: &str) -> Result<HostTensor> {
        let (g, order) = self.entry(name)?;
        let shape = self.file.tensors[g].hf_shape();
        let rows = shape[0];
        let cols: usize = shape[1..].iter().product();
        let values = self.hf_rows(g, order, self.file.read_f32(g)?, rows, cols)?;
        Ok(HostTensor::from_f32(shape, &values))
    }

    fn read_quantized(&self, name: &str) -> Result<Option<QuantizedMatrix>> {
        let (g, order) = self.entry(name)?;
        let shape = self.file.tensors[g].hf_shape();
        let (ty, bytes) = self.file.raw(g)?;
        let (Some(format), &[rows, cols]) = (ty.block_format(), &shape[..]) else {
            return Ok(None);
        };
        let row_bytes = bytes.len() / rows.max(1);
        let bytes = self.hf_rows(g, order, bytes.to_vec(), rows, row_bytes)?;
        QuantizedMatrix::new(format, rows, cols, bytes)
            .map(Some)
            .map_err(|problem| CheckpointError::BadKey {
                origin: self.origin(),
                key: g.to_string(),
                problem,
            })
    }

    fn read_format(&self, name: &str) -> Option<FloatFormat> {
        let (g, _) = self.names.get(name)?;
        GgmlType::from_id(self.file.tensors[g].type_id)
            .ok()
            .map(|_| FloatFormat::F32)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_map_to_hf() {
        assert_eq!(
            hf_name("blk.3.attn_q.weight").as_deref(),
            Some("model.layers.3.self_attn.q_proj.weight")
        );
        assert_eq!(
            hf_name("blk.12.ffn_down.weight").as_deref(),
            Some("model.layers.12.mlp.down_proj.weight")
        );
        assert_eq!(
            hf_name("token_embd.weight").as_deref(),
            Some("model.embed_tokens.weight")
        );
        assert_eq!(hf_name("rope_freqs.weight"), None);
    }
}
