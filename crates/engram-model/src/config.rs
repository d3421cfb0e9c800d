//! The model configuration, read from an HF `config.json` in either spelling of rope settings
//! (`rope_theta` + `rope_scaling`, or transformers 5's `rope_parameters`). One decoder with small
//! per-architecture differences ([`Architecture`]): Llama, Mistral (Llama's layers; a sliding
//! window, honoured by never attending past it: the usable context is capped at the window, where
//! sliding and full attention are the same), Qwen2 / Qwen2.5 (bias on q, k and v, none on the
//! output projection) and Qwen3 (an RMSNorm on each head of q and k, before RoPE).

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::{ModelError, Result};

/// Rotary-embedding frequency scaling.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "rope_type", rename_all = "lowercase")]
pub enum RopeScaling {
    /// Plain RoPE (`rope_type: "default"`, or no scaling).
    Default,
    /// Position interpolation: every frequency divided by `factor`.
    Linear {
        /// Divisor.
        factor: f64,
    },
    /// Llama 3.1's scaling (`rope_type: "llama3"`).
    Llama3 {
        /// Divisor for low frequencies.
        factor: f64,
        /// Wavelength bound (as context / factor) above which frequencies are divided.
        low_freq_factor: f64,
        /// Wavelength bound below which frequencies are kept.
        high_freq_factor: f64,
        /// The pre-training context length.
        original_max_position_embeddings: f64,
    },
}

/// The decoder families engram runs, as HF's `config.json` names them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Architecture {
    /// `LlamaForCausalLM` (Llama 2/3.x, SmolLM2, …).
    #[default]
    Llama,
    /// `Qwen2ForCausalLM` (Qwen2, Qwen2.5): bias on q, k and v (never on o), full attention.
    Qwen2,
    /// `Qwen3ForCausalLM`: per-head RMSNorm on q and k (`q_norm`, `k_norm`), an explicit
    /// `head_dim`, bias only with `attention_bias`, full attention.
    Qwen3,
    /// `MistralForCausalLM`: Llama's layers; its `sliding_window` caps the usable context.
    Mistral,
}

impl Architecture {
    /// Every supported architecture with its HF class and `model_type`.
    pub const SUPPORTED: [(Architecture, &'static str, &'static str); 4] = [
        (Architecture::Llama, "LlamaForCausalLM", "llama"),
        (Architecture::Mistral, "MistralForCausalLM", "mistral"),
        (Architecture::Qwen2, "Qwen2ForCausalLM", "qwen2"),
        (Architecture::Qwen3, "Qwen3ForCausalLM", "qwen3"),
    ];

    /// The architecture `architectures[0]` (or, without it, `model_type`) names.
    pub fn from_hf(class: Option<&str>, model_type: Option<&str>) -> Option<Self> {
        Self::SUPPORTED
            .iter()
            .find(|(_, c, t)| match class {
                Some(class) => class == *c,
                None => model_type == Some(*t),
            })
            .map(|(a, _, _)| *a)
    }

    /// The supported architectures, for messages: `LlamaForCausalLM ("llama"), …`.
    pub fn supported_list() -> String {
        Self::SUPPORTED
            .iter()
            .map(|(_, c, t)| format!("{c} (\"{t}\")"))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// A Llama-family decoder's hyper-parameters.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LlamaConfig {
    /// The architecture (which of the small per-family differences apply).
    #[serde(default)]
    pub architecture: Architecture,
    /// Vocabulary size (rows of the embedding).
    pub vocab_size: usize,
    /// Model width.
    pub hidden_size: usize,
    /// MLP width.
    pub intermediate_size: usize,
    /// Number of decoder blocks.
    pub num_hidden_layers: usize,
    /// Query heads.
    pub num_attention_heads: usize,
    /// Key/value heads (grouped-query attention when fewer than query heads).
    pub num_key_value_heads: usize,
    /// Per-head width.
    pub head_dim: usize,
    /// Context window: `max_position_embeddings`, or Mistral's `sliding_window` when smaller
    /// (every consumer — generation, long context, training — stays within it).
    pub max_position_embeddings: usize,
    /// Mistral's sliding window, when the config sets one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sliding_window: Option<usize>,
    /// RMSNorm epsilon.
    pub rms_norm_eps: f64,
    /// RoPE base.
    pub rope_theta: f64,
    /// RoPE scaling.
    pub rope_scaling: RopeScaling,
    /// Per-frequency divisors from llama.cpp's `rope_freqs.weight` (GGUF only), applied on top.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rope_freq_factors: Option<Vec<f32>>,
    /// Whether `lm_head` shares the embedding matrix.
    pub tie_word_embeddings: bool,
    /// Bias on the q, k and v projections.
    pub qkv_bias: bool,
    /// Bias on the attention's output projection.
    pub o_bias: bool,
    /// An RMSNorm over each head of q and of k before RoPE (Qwen3's `q_norm`, `k_norm`).
    #[serde(default)]
    pub qk_norm: bool,
    /// Bias on the MLP projections.
    pub mlp_bias: bool,
    /// BOS id, when the config names one.
    pub bos_token_id: Option<u32>,
    /// EOS id(s) named by the config.
    pub eos_token_ids: Vec<u32>,
    /// Pad id, when named.
    pub pad_token_id: Option<u32>,
}

struct Reader<'a> {
    v: &'a Value,
    origin: &'a str,
}

impl Reader<'_> {
    fn err(&self, key: &str, problem: impl Into<String>) -> ModelError {
        ModelError::BadConfig {
            origin: self.origin.to_string(),
            key: key.to_string(),
            problem: problem.into(),
        }
    }

    fn usize(&self, key: &str) -> Result<usize> {
        match self.v.get(key) {
            None | Some(Value::Null) => Err(self.err(key, "is missing")),
            Some(x) => x
                .as_u64()
                .filter(|&n| n > 0)
                .map(|n| n as usize)
                .ok_or_else(|| self.err(key, format!("is {x}, expected a positive integer"))),
        }
    }

    fn opt_usize(&self, key: &str) -> Result<Option<usize>> {
        match self.v.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(_) => self.usize(key).map(Some),
        }
    }

    fn f64_in(&self, v: &Value, key: &str) -> Result<Option<f64>> {
        match v.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(x) => x
                .as_f64()
                .map(Some)
                .ok_or_else(|| self.err(key, format!("is {x}, expected a number"))),
        }
    }

    fn bool(&self, key: &str, default: bool) -> Result<bool> {
        match self.v.get(key) {
            None | Some(Value::Null) => Ok(default),
            Some(x) => x
                .as_bool()
                .ok_or_else(|| self.err(key, format!("is {x}, expected true or false"))),
        }
    }

    fn ids(&self, key: &str) -> Result<Vec<u32>> {
        match self.v.get(key) {
            None | Some(Value::Null) => Ok(vec![]),
            Some(Value::Number(n)) => n
                .as_u64()
                .and_then(|x| u32::try_from(x).ok())
                .map(|x| vec![x])
                .ok_or_else(|| self.err(key, format!("is {n}, not a token id"))),
            Some(Value::Array(a)) => a
                .iter()
                .map(|x| {
                    x.as_u64()
                        .and_then(|x| u32::try_from(x).ok())
                        .ok_or_else(|| self.err(key, format!("holds {x}, not a token id")))
                })
                .collect(),
            Some(x) => Err(self.err(key, format!("is {x}, expected an id or a list of ids"))),
        }
    }
}

impl LlamaConfig {
    /// Parses an HF `config.json` value. `origin` names the file in errors.
    pub fn from_hf_json(v: &Value, origin: &str) -> Result<Self> {
        let r = Reader { v, origin };
        let arch = v
            .get("architectures")
            .and_then(|a| a.as_array())
            .and_then(|a| a.first())
            .and_then(|a| a.as_str());
        let model_type = v.get("model_type").and_then(|m| m.as_str());
        let Some(architecture) = Architecture::from_hf(arch, model_type) else {
            return Err(ModelError::UnknownArchitecture {
                origin: origin.to_string(),
                architecture: arch.or(model_type).unwrap_or("(none given)").to_string(),
                supported: Architecture::supported_list(),
            });
        };
        // Qwen2's sliding window (`use_sliding_window`) changes which keys a query sees; engram
        // attends to the whole context, so a config that turns it on is refused, never run
        // silently wrong.
        let qwen = matches!(architecture, Architecture::Qwen2 | Architecture::Qwen3);
        if qwen && r.bool("use_sliding_window", false)? {
            return Err(r.err(
                "use_sliding_window",
                "is true; engram runs Qwen2 and Qwen3 with full attention only (the published Qwen2.5 and Qwen3 configs set it false)",
            ));
        }
        // transformers 5 spells the same per layer.
        if qwen
            && let Some(types) = v.get("layer_types").and_then(|t| t.as_array())
            && let Some(other) = types
                .iter()
                .filter_map(|t| t.as_str())
                .find(|t| *t != "full_attention")
        {
            return Err(r.err(
                "layer_types",
                format!("holds `{other}`; engram runs full attention only"),
            ));
        }
        let hidden_size = r.usize("hidden_size")?;
        let heads = r.usize("num_attention_heads")?;
        let kv_heads = r.opt_usize("num_key_value_heads")?.unwrap_or(heads);
        if heads % kv_heads != 0 {
            return Err(r.err(
                "num_key_value_heads",
                format!("is {kv_heads}, which does not divide num_attention_heads = {heads}"),
            ));
        }
        let head_dim = match r.opt_usize("head_dim")? {
            Some(d) => d,
            None => {
                if hidden_size % heads != 0 {
                    return Err(r.err(
                        "num_attention_heads",
                        format!("is {heads}, which does not divide hidden_size = {hidden_size}"),
                    ));
                }
                hidden_size / heads
            }
        };
        if head_dim % 2 != 0 {
            return Err(r.err(
                "head_dim",
                format!("is {head_dim}; rotary embeddings need it even"),
            ));
        }
        // Rope settings: transformers 5 nests everything in `rope_parameters`; older configs have
        // top-level `rope_theta` and an optional `rope_scaling` dict.
        let params = v
            .get("rope_parameters")
            .filter(|p| p.is_object())
            .or_else(|| v.get("rope_scaling").filter(|p| p.is_object()));
        let rope_theta = params
            .map(|p| r.f64_in(p, "rope_theta"))
            .transpose()?
            .flatten()
            .or(r.f64_in(v, "rope_theta")?)
            .unwrap_or(10_000.0);
        let rope_scaling = match params {
            None => RopeScaling::Default,
            Some(p) => {
                let ty = p
                    .get("rope_type")
                    .or_else(|| p.get("type"))
                    .and_then(|t| t.as_str())
                    .unwrap_or("default");
                let need = |key: &str| -> Result<f64> {
                    r.f64_in(p, key)?
                        .ok_or_else(|| r.err(&format!("rope_scaling.{key}"), "is missing"))
                };
                match ty {
                    "default" => RopeScaling::Default,
                    "linear" => RopeScaling::Linear {
                        factor: need("factor")?,
                    },
                    "llama3" => RopeScaling::Llama3 {
                        factor: need("factor")?,
                        low_freq_factor: need("low_freq_factor")?,
                        high_freq_factor: need("high_freq_factor")?,
                        original_max_position_embeddings: need("original_max_position_embeddings")?,
                    },
                    other => {
                        return Err(r.err(
                            "rope_scaling.rope_type",
                            format!("is `{other}`; supported: default, linear, llama3"),
                        ));
                    }
                }
            }
        };
        // Settings that change the maths and that no architecture here uses: named, never
        // ignored.
        for key in ["attn_logit_softcapping", "final_logit_softcapping"] {
            if v.get(key).is_some_and(|x| !x.is_null()) {
                return Err(r.err(key, "is set; engram does not soft-cap logits"));
            }
        }
        let max_positions = r.opt_usize("max_position_embeddings")?.unwrap_or(2048);
        let sliding_window = match architecture {
            Architecture::Mistral => r.opt_usize("sliding_window")?,
            _ => None,
        };
        let act = v
            .get("hidden_act")
            .and_then(|a| a.as_str())
            .unwrap_or("silu");
        if act != "silu" {
            return Err(r.err("hidden_act", format!("is `{act}`; Llama uses silu")));
        }
        Ok(Self {
            architecture,
            vocab_size: r.usize("vocab_size")?,
            hidden_size,
            intermediate_size: r.usize("intermediate_size")?,
            num_hidden_layers: r.usize("num_hidden_layers")?,
            num_attention_heads: heads,
            num_key_value_heads: kv_heads,
            head_dim,
            max_position_embeddings: sliding_window.map_or(max_positions, |w| w.min(max_positions)),
            sliding_window,
            rms_norm_eps: r.f64_in(v, "rms_norm_eps")?.unwrap_or(1e-6),
            rope_theta,
            rope_scaling,
            rope_freq_factors: None,
            tie_word_embeddings: r.bool("tie_word_embeddings", false)?,
            // Llama's `attention_bias` covers all four projections; Qwen2 has q/k/v bias always
            // and none on o.
            qkv_bias: architecture == Architecture::Qwen2 || r.bool("attention_bias", false)?,
            o_bias: architecture != Architecture::Qwen2 && r.bool("attention_bias", false)?,
            qk_norm: architecture == Architecture::Qwen3,
            mlp_bias: r.bool("mlp_bias", false)?,
            bos_token_id: r.ids("bos_token_id")?.first().copied(),
            eos_token_ids: r.ids("eos_token_id")?,
            // Older converted Llama configs say `"pad_token_id": -1` for none, which
            // transformers loads as such.
            pad_token_id: match v.get("pad_token_id").and_then(Value::as_i64) {
                Some(id) if id < 0 => None,
                _ => r.ids("pad_token_id")?.first().copied(),
            },
        })
    }

    /// Query heads per key/value head.
    pub fn gqa_groups(&self) -> usize {
        self.num_attention_heads / self.num_key_value_heads
    }

    /// Total parameter count implied by the config.
    pub fn num_parameters(&self) -> usize {
        let (h, i, v) = (self.hidden_size, self.intermediate_size, self.vocab_size);
        let q = self.num_attention_heads * self.head_dim;
        let kv = self.num_key_value_heads * self.head_dim;
        let attn = h * q + 2 * h * kv + q * h;
        let attn_bias =
            if self.qkv_bias { q + 2 * kv } else { 0 } + if self.o_bias { h } else { 0 };
        let mlp = 3 * h * i + if self.mlp_bias { 2 * i + h } else { 0 };
        let qk_norm = if self.qk_norm { 2 * self.head_dim } else { 0 };
        let per_layer = attn + attn_bias + mlp + 2 * h + qk_norm;
        let head = if self.tie_word_embeddings { 0 } else { v * h };
        v * h + self.num_hidden_layers * per_layer + h + head
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn base() -> Value {
        json!({"architectures": ["LlamaForCausalLM"], "vocab_size": 100, "hidden_size": 64,
               "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4,
               "num_key_value_heads": 2})
    }

    #[test]
    fn both_rope_spellings_agree() {
        let mut old = base();
        old["rope_theta"] = json!(500000.0);
        old["rope_scaling"] = json!({"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
            "high_freq_factor": 4.0, "original_max_position_embeddings": 8192});
        let mut new = base();
        new["rope_parameters"] = json!({"rope_type": "llama3", "rope_theta": 500000.0, "factor": 8.0,
            "low_freq_factor": 1.0, "high_freq_factor": 4.0, "original_max_position_embeddings": 8192});
        let a = LlamaConfig::from_hf_json(&old, "old").unwrap();
        let b = LlamaConfig::from_hf_json(&new, "new").unwrap();
        assert_eq!(a, b);
        assert_eq!(a.rope_theta, 500000.0);
        assert!(matches!(a.rope_scaling, RopeScaling::Llama3 { factor, .. } if factor == 8.0));
        assert_eq!(a.head_dim, 16);
        assert_eq!(a.gqa_groups(), 2);
    }

    /// `"pad_token_id": -1` (older converted Llama configs) means none, as transformers reads
    /// it; a token id that is not one is named with its value.
    #[test]
    fn a_negative_pad_id_is_none_and_a_bad_id_is_named() {
        let mut c = base();
        c["pad_token_id"] = json!(-1);
        assert_eq!(
            LlamaConfig::from_hf_json(&c, "c").unwrap().pad_token_id,
            None
        );
        c["pad_token_id"] = json!(7);
        assert_eq!(
            LlamaConfig::from_hf_json(&c, "c").unwrap().pad_token_id,
            Some(7)
        );
        c["eos_token_id"] = json!([2, -5]);
        let e = LlamaConfig::from_hf_json(&c, "c").unwrap_err().to_string();
        assert!(e.contains("eos_token_id") && e.contains("-5"), "{e}");
        c["eos_token_id"] = json!(4294967296u64);
        let e = LlamaConfig::from_hf_json(&c, "c").unwrap_err().to_string();
        assert!(e.contains("4294967296"), "{e}");
    }

    #[test]
    fn qwen2_has_qkv_bias_and_refuses_a_sliding_window() {
        let mut c = base();
        c["architectures"] = json!(["Qwen2ForCausalLM"]);
        c["use_sliding_window"] = json!(false);
        c["sliding_window"] = json!(32768);
        let q = LlamaConfig::from_hf_json(&c, "q.json").unwrap();
        assert_eq!(q.architecture, Architecture::Qwen2);
        assert!(q.qkv_bias && !q.o_bias);
        let l = LlamaConfig::from_hf_json(&base(), "l.json").unwrap();
        // q, k and v biases: 64 + 2 × 32 per layer.
        assert_eq!(q.num_parameters() - l.num_parameters(), 2 * 128);
        c["layer_types"] = json!(["full_attention", "sliding_attention"]);
        let e = LlamaConfig::from_hf_json(&c, "q.json")
            .unwrap_err()
            .to_string();
        assert!(e.contains("sliding_attention"), "{e}");
        c["layer_types"] = json!(["full_attention", "full_attention"]);
        c["use_sliding_window"] = json!(true);
        let e = LlamaConfig::from_hf_json(&c, "q.json")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("use_sliding_window") && e.contains("q.json"),
            "{e}"
        );
        let mut b = base();
        b["attention_bias"] = json!(true);
        let lb = LlamaConfig::from_hf_json(&b, "b.json").unwrap();
        assert!(lb.qkv_bias && lb.o_bias);
    }

    #[test]
    fn qwen3_normalizes_q_and_k_and_takes_head_dim_as_given() {
        let mut c = base();
        c["architectures"] = json!(["Qwen3ForCausalLM"]);
        c["head_dim"] = json!(32);
        let q = LlamaConfig::from_hf_json(&c, "q3.json").unwrap();
        assert_eq!(q.architecture, Architecture::Qwen3);
        assert!(q.qk_norm && !q.qkv_bias && !q.o_bias);
        assert_eq!(q.head_dim, 32);
        c["attention_bias"] = json!(true);
        let b = LlamaConfig::from_hf_json(&c, "q3.json").unwrap();
        assert!(b.qkv_bias && b.o_bias);
    }

    #[test]
    fn mistral_caps_its_context_at_the_sliding_window() {
        let mut c = base();
        c["architectures"] = json!(["MistralForCausalLM"]);
        c["max_position_embeddings"] = json!(32768);
        c["sliding_window"] = json!(4096);
        let m = LlamaConfig::from_hf_json(&c, "m.json").unwrap();
        assert_eq!(m.architecture, Architecture::Mistral);
        assert_eq!(
            (m.max_position_embeddings, m.sliding_window),
            (4096, Some(4096))
        );
        assert!(!m.qkv_bias && !m.o_bias && !m.qk_norm);
        c["sliding_window"] = json!(null);
        let m = LlamaConfig::from_hf_json(&c, "m.json").unwrap();
        assert_eq!((m.max_position_embeddings, m.sliding_window), (32768, None));
    }

    #[test]
    fn errors_name_the_key() {
        let mut c = base();
        c["architectures"] = json!(["GPT2LMHeadModel"]);
        let e = LlamaConfig::from_hf_json(&c, "x/config.json")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("GPT2LMHeadModel")
                && e.contains("x/config.json")
                && e.contains("Qwen2ForCausalLM"),
            "{e}"
        );
        let mut c = base();
        c.as_object_mut().unwrap().remove("hidden_size");
        let e = LlamaConfig::from_hf_json(&c, "c.json")
            .unwrap_err()
            .to_string();
        assert!(e.contains("`hidden_size` is missing"), "{e}");
        let mut c = base();
        c["num_key_value_heads"] = json!(3);
        let e = LlamaConfig::from_hf_json(&c, "c.json")
            .unwrap_err()
            .to_string();
        assert!(e.contains("num_key_value_heads"), "{e}");
        let mut c = base();
        c["final_logit_softcapping"] = json!(30.0);
        let e = LlamaConfig::from_hf_json(&c, "c.json")
            .unwrap_err()
            .to_string();
        assert!(e.contains("final_logit_softcapping"), "{e}");
        let mut c = base();
        c["rope_scaling"] = json!({"rope_type": "yarn", "factor": 4.0});
        let e = LlamaConfig::from_hf_json(&c, "c.json")
            .unwrap_err()
            .to_string();
        assert!(e.contains("yarn"), "{e}");
    }

    #[test]
    fn real_llama_31_config_parses() {
        let path = format!(
            "{}/../../configs/models/llama-3.1-8b-instruct.config.json",
            std::env::var("CARGO_MANIFEST_DIR").expect("cargo test sets CARGO_MANIFEST_DIR")
        );
        let Ok(text) = std::fs::read_to_string(&path) else {
            panic!("{path} missing: the repository ships it beside the model preset");
        };
        let c = LlamaConfig::from_hf_json(&serde_json::from_str(&text).unwrap(), &path).unwrap();
        assert_eq!(c.num_hidden_layers, 32);
        assert_eq!(c.num_key_value_heads, 8);
        assert_eq!(c.eos_token_ids, vec![128001, 128008, 128009]);
        assert_eq!(c.num_parameters(), 8_030_261_248);
        assert!(
            matches!(c.rope_scaling, RopeScaling::Llama3 { original_max_position_embeddings, .. } if original_max_position_embeddings == 8192.0)
        );
    }
}
