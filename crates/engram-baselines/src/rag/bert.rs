//! A BERT sentence encoder in Burn, as sentence-transformers runs all-MiniLM-L6-v2: `BertModel`
//! (post-norm blocks, exact-erf GELU, LayerNorm eps from the config), mean pooling over the
//! attention mask, L2 normalization. Reads an HF directory (`config.json`, `model.safetensors`,
//! `tokenizer.json`, and `sentence_bert_config.json` where there is one; the tokenizer's
//! built-in padding/truncation are turned off, and inputs longer than its `max_seq_length` — else
//! `max_position_embeddings` — are cut as sentence-transformers cuts them, keeping `[SEP]`).

use std::path::{Path, PathBuf};

use burn::tensor::activation::{gelu, softmax};
use burn::tensor::{Bool, DType, Device, Int, Tensor, TensorData};
use engram_checkpoint::{SafetensorsCheckpoint, TensorSource};
use serde_json::Value;
use tokenizers::Tokenizer;

use crate::error::{BaselineError, Result};

struct Dense {
    w: Tensor<2>, // [in, out]
    b: Tensor<1>,
}

impl Dense {
    fn forward(&self, x: Tensor<3>) -> Tensor<3> {
        burn::tensor::module::linear(x, self.w.clone(), Some(self.b.clone()))
    }
}

struct LayerNorm {
    w: Tensor<1>,
    b: Tensor<1>,
    eps: f64,
}

impl LayerNorm {
    fn forward(&self, x: Tensor<3>) -> Tensor<3> {
        let mean = x.clone().mean_dim(2);
        let centered = x - mean;
        let var = centered.clone().square().mean_dim(2);
        let y = centered / var.add_scalar(self.eps).sqrt();
        y * self.w.clone().unsqueeze::<3>() + self.b.clone().unsqueeze::<3>()
    }
}

struct Layer {
    q: Dense,
    k: Dense,
    v: Dense,
    o: Dense,
    attn_norm: LayerNorm,
    up: Dense,
    down: Dense,
    out_norm: LayerNorm,
}

/// The encoder.
pub struct BertEncoder {
    word: Tensor<2>,
    position: Tensor<2>,
    token_type: Tensor<2>,
    embed_norm: LayerNorm,
    layers: Vec<Layer>,
    heads: usize,
    max_len: usize,
    tokenizer: Tokenizer,
    device: Device,
    /// Where it was loaded from.
    pub origin: PathBuf,
}

/// The weights, read through engram-checkpoint (memory-mapped, any float format → f32).
struct Weights {
    st: SafetensorsCheckpoint,
}

impl Weights {
    fn get(&self, name: &str, device: &Device) -> Result<(Vec<usize>, Tensor<1>)> {
        let t = self.st.read(name)?;
        let v = t.to_f32();
        let n = v.len();
        Ok((
            t.shape,
            Tensor::from_data(TensorData::new(v, [n]), (device, DType::F32)),
        ))
    }

    fn matrix(&self, name: &str, device: &Device) -> Result<Tensor<2>> {
        let (shape, t) = self.get(name, device)?;
        Ok(t.reshape([shape[0], shape[1]]))
    }

    fn vector(&self, name: &str, device: &Device) -> Result<Tensor<1>> {
        Ok(self.get(name, device)?.1)
    }

    fn dense(&self, prefix: &str, device: &Device) -> Result<Dense> {
        // HF stores [out, in]; transpose once here.
        let w = self.matrix(&format!("{prefix}.weight"), device)?;
        let w = Tensor::from_data(w.transpose().into_data(), device);
        Ok(Dense {
            w,
            b: self.vector(&format!("{prefix}.bias"), device)?,
        })
    }

    fn norm(&self, prefix: &str, eps: f64, device: &Device) -> Result<LayerNorm> {
        Ok(LayerNorm {
            w: self.vector(&format!("{prefix}.weight"), device)?,
            b: self.vector(&format!("{prefix}.bias"), device)?,
            eps,
        })
    }
}

impl BertEncoder {
    /// Loads an HF BERT directory onto `device`.
    pub fn load(dir: &Path, device: &Device) -> Result<Self> {
        let read = |f: &str| {
            let p = dir.join(f);
            std::fs::read(&p).map_err(|e| BaselineError::Bad(format!("{}: {e}", p.display())))
        };
        let cfg: Value = serde_json::from_slice(&read("config.json")?)
            .map_err(|e| BaselineError::Bad(format!("{}/config.json: {e}", dir.display())))?;
        let key = |k: &str| {
            cfg[k].as_u64().map(|v| v as usize).ok_or_else(|| {
                BaselineError::Bad(format!("{}/config.json: key `{k}` missing", dir.display()))
            })
        };
        let (layers, heads, positions) = (
            key("num_hidden_layers")?,
            key("num_attention_heads")?,
            key("max_position_embeddings")?,
        );
        // sentence-transformers' own limit (`max_seq_length`, 256 for all-MiniLM-L6-v2), where
        // the directory has its config: texts are cut there, not at the position table's end.
        let st_path = dir.join("sentence_bert_config.json");
        let max_len = match std::fs::read(&st_path) {
            Ok(bytes) => {
                let st: Value = serde_json::from_slice(&bytes)
                    .map_err(|e| BaselineError::Bad(format!("{}: {e}", st_path.display())))?;
                match st.get("max_seq_length") {
                    None | Some(Value::Null) => positions,
                    Some(v) => v.as_u64().filter(|&n| n >= 2).map_or_else(
                        || {
                            Err(BaselineError::Bad(format!(
                                "{}: max_seq_length = {v}: expected a token count ≥ 2",
                                st_path.display()
                            )))
                        },
                        |n| Ok((n as usize).min(positions)),
                    )?,
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => positions,
            Err(e) => {
                return Err(BaselineError::Bad(format!("{}: {e}", st_path.display())));
            }
        };
        let eps = cfg["layer_norm_eps"].as_f64().unwrap_or(1e-12);
        let w = Weights {
            st: SafetensorsCheckpoint::open_dir(dir)?,
        };
        let mut tokenizer = Tokenizer::from_file(dir.join("tokenizer.json"))
            .map_err(|e| BaselineError::Bad(format!("{}/tokenizer.json: {e}", dir.display())))?;
        tokenizer.with_padding(None);
        tokenizer
            .with_truncation(None)
            .map_err(|e| BaselineError::Bad(e.to_string()))?;
        let mut blocks = Vec::with_capacity(layers);
        for l in 0..layers {
            let p = format!("encoder.layer.{l}");
            blocks.push(Layer {
                q: w.dense(&format!("{p}.attention.self.query"), device)?,
                k: w.dense(&format!("{p}.attention.self.key"), device)?,
                v: w.dense(&format!("{p}.attention.self.value"), device)?,
                o: w.dense(&format!("{p}.attention.output.dense"), device)?,
                attn_norm: w.norm(&format!("{p}.attention.output.LayerNorm"), eps, device)?,
                up: w.dense(&format!("{p}.intermediate.dense"), device)?,
                down: w.dense(&format!("{p}.output.dense"), device)?,
                out_norm: w.norm(&format!("{p}.output.LayerNorm"), eps, device)?,
            });
        }
        Ok(Self {
            word: w.matrix("embeddings.word_embeddings.weight", device)?,
            position: w.matrix("embeddings.position_embeddings.weight", device)?,
            token_type: w.matrix("embeddings.token_type_embeddings.weight", device)?,
            embed_norm: w.norm("embeddings.LayerNorm", eps, device)?,
            layers: blocks,
            heads,
            max_len,
            tokenizer,
            device: device.clone(),
            origin: dir.to_path_buf(),
        })
    }

    /// Token ids of a text (`[CLS] … [SEP]`), cut as sentence-transformers cuts it: to
    /// `max_seq_length` tokens (else the position limit), the text's end dropped and the
    /// closing `[SEP]` kept.
    pub fn tokenize(&self, text: &str) -> Result<Vec<u32>> {
        let enc = self
            .tokenizer
            .encode(text, true)
            .map_err(|e| BaselineError::Bad(format!("tokenizing: {e}")))?;
        let mut ids = enc.get_ids().to_vec();
        if ids.len() > self.max_len {
            let sep = *ids.last().expect("longer than the limit");
            ids.truncate(self.max_len.saturating_sub(1));
            ids.push(sep);
        }
        Ok(ids)
    }

    /// Unit-length sentence embeddings of `texts`, in batches of `batch`.
    pub fn encode(&self, texts: &[String], batch: usize) -> Result<Vec<Vec<f32>>> {
        let ids = texts
            .iter()
            .map(|t| self.tokenize(t))
            .collect::<Result<Vec<_>>>()?;
        let mut out = Vec::with_capacity(texts.len());
        for chunk in ids.chunks(batch.max(1)) {
            out.extend(self.encode_ids(chunk));
        }
        Ok(out)
    }

    /// Embeddings of tokenized inputs (one batch, right-padded internally).
    pub fn encode_ids(&self, rows: &[Vec<u32>]) -> Vec<Vec<f32>> {
        let dev = &self.device;
        let b = rows.len();
        let t = rows.iter().map(Vec::len).max().unwrap_or(0).max(1);
        let mut flat = Vec::with_capacity(b * t);
        let mut keep = Vec::with_capacity(b * t);
        for r in rows {
            for i in 0..t {
                flat.push(r.get(i).copied().unwrap_or(0) as i64);
                keep.push(if i < r.len() { 1.0f32 } else { 0.0 });
            }
        }
        let ids: Tensor<2, Int> = Tensor::from_data(TensorData::new(flat, [b, t]), dev);
        let keep: Tensor<2> = Tensor::from_data(TensorData::new(keep, [b, t]), (dev, DType::F32));
        let hidden = self.word.dims()[1];
        let d = hidden / self.heads;
        let pos = self.position.clone().narrow(0, 0, t).unsqueeze::<3>();
        let typ = self.token_type.clone().narrow(0, 0, 1).unsqueeze::<3>();
        let mut x = burn::tensor::module::embedding(self.word.clone(), ids) + pos + typ;
        x = self.embed_norm.forward(x);
        // Padded keys are masked for every query: [b, 1, 1, t].
        let masked: Tensor<4, Bool> = keep
            .clone()
            .equal_elem(0.0)
            .reshape([b, 1, 1, t])
            .expand([b, self.heads, t, t]);
        for l in &self.layers {
            let split = |y: Tensor<3>| y.reshape([b, t, self.heads, d]).swap_dims(1, 2);
            let q = split(l.q.forward(x.clone()));
            let k = split(l.k.forward(x.clone()));
            let v = split(l.v.forward(x.clone()));
            let scores = q
                .matmul(k.swap_dims(2, 3))
                .mul_scalar((d as f64).powf(-0.5))
                .mask_fill(masked.clone(), f32::MIN);
            let ctx = softmax(scores, 3)
                .matmul(v)
                .swap_dims(1, 2)
                .reshape([b, t, hidden]);
            let a = l.attn_norm.forward(l.o.forward(ctx) + x);
            x = l
                .out_norm
                .forward(l.down.forward(gelu(l.up.forward(a.clone()))) + a);
        }
        let w = keep.clone().unsqueeze_dim::<3>(2);
        let summed = (x * w).sum_dim(1).reshape([b, hidden]);
        let counts = keep.sum_dim(1).clamp_min(1e-9);
        let mean = summed / counts;
        let norm = mean.clone().square().sum_dim(1).sqrt().clamp_min(1e-12);
        let e = (mean / norm)
            .into_data()
            .try_into_vec_as::<f32>()
            .expect("f32");
        e.chunks(hidden).map(<[f32]>::to_vec).collect()
    }
}
