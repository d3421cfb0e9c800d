//! Batched generation with a KV cache: prompts are left-padded to one length, prefilled together,
//! then decoded token by token until every row has produced a stop id or the budget is spent.

use std::time::Instant;

use burn::tensor::{DType, Tensor, TensorData};

use crate::cpu_matmul::{ProductScope, QuantizedProduct};
use crate::error::{ModelError, Result};
use crate::kv_cache::KvCache;
use crate::llama::Llama;
use crate::sampling::{Sampler, Sampling};

/// Settings of one generation call.
#[derive(Debug, Clone)]
pub struct GenerationConfig {
    /// Most new tokens per row.
    pub max_new_tokens: usize,
    /// Greedy or sampled.
    pub sampling: Sampling,
    /// Ids that end a row (not included in the output).
    pub stop_ids: Vec<u32>,
    /// How the CPU multiplies by a checkpoint's quantized blocks while generating (exact by
    /// default; see [`QuantizedProduct`]).
    pub matmul: QuantizedProduct,
}

impl Default for GenerationConfig {
    fn default() -> Self {
        Self {
            max_new_tokens: 128,
            sampling: Sampling::Greedy,
            stop_ids: Vec::new(),
            matmul: QuantizedProduct::Exact,
        }
    }
}

/// The result of [`generate`], with timings for benchmarks.
#[derive(Debug, Clone, Default)]
pub struct Generation {
    /// New tokens of each row, the stop id excluded.
    pub tokens: Vec<Vec<u32>>,
    /// Whether each row ended on a stop id (else it ran out of budget or context).
    pub stopped: Vec<bool>,
    /// Prompt tokens prefilled (padding excluded).
    pub prefill_tokens: usize,
    /// Seconds spent in prefill (including the first token choice).
    pub prefill_secs: f64,
    /// Tokens produced after the first, over all rows, while decoding.
    pub decode_tokens: usize,
    /// Seconds spent decoding after prefill.
    pub decode_secs: f64,
}

/// `t` read back to the host; a device that failed running the work behind it is
/// [`ModelError::DeviceFailed`].
fn read<const D: usize, K: burn::tensor::kind::Basic>(t: Tensor<D, K>) -> Result<TensorData> {
    let device = t.device();
    t.try_into_data().map_err(|e| ModelError::DeviceFailed {
        device: crate::device::describe(&device),
        message: crate::device_message(&e.to_string()),
    })
}

/// Greedy argmax per row on the device; only `batch` ids come back to the host.
fn argmax_rows(logits: Tensor<2>) -> Result<Vec<u32>> {
    let data = read(logits.cast(DType::F32).argmax(1))?;
    Ok(data
        .try_into_vec_as::<i64>()
        .expect("argmax returns ints")
        .into_iter()
        .map(|x| x as u32)
        .collect())
}

fn host_rows(logits: Tensor<2>) -> Result<Vec<Vec<f32>>> {
    let [b, v] = logits.dims();
    let flat: Vec<f32> = read(logits.cast(DType::F32))?
        .try_into_vec_as::<f32>()
        .expect("float logits");
    Ok((0..b).map(|i| flat[i * v..(i + 1) * v].to_vec()).collect())
}

/// Generates continuations of `prompts` (token ids, no padding) in one batch.
pub fn generate(model: &Llama, prompts: &[Vec<u32>], cfg: &GenerationConfig) -> Result<Generation> {
    if prompts.is_empty() {
        return Ok(Generation::default());
    }
    if let Some(i) = prompts.iter().position(Vec::is_empty) {
        return Err(ModelError::Generation(format!("prompt #{i} is empty")));
    }
    let longest = prompts.iter().map(Vec::len).max().unwrap_or(0);
    let window = model.config.max_position_embeddings;
    if longest > window {
        return Err(ModelError::Generation(format!(
            "a prompt has {longest} tokens, more than the model's context window of {window}"
        )));
    }
    let pad_id = cfg.stop_ids.first().copied().unwrap_or(0);
    let pads: Vec<usize> = prompts.iter().map(|p| longest - p.len()).collect();
    let rows = left_pad(prompts, longest, pad_id);
    let cache = model.new_cache(pads);
    let prefill_tokens = prompts.iter().map(Vec::len).sum();
    decode(model, cache, rows, longest, prefill_tokens, cfg)
}

/// The log-probability (log-softmax of the logits, summed in f64) that the model gives each
/// token of `forced` after `prompt` and the forced tokens before it: one row, prefilled, then
/// fed one forced token at a time as [`generate`] decodes, so the products run as they do when
/// it generates (the CPU's [`crate::cpu_matmul::QuantizedProduct`] included). For comparing
/// engines on the same tokens.
pub fn forced_logprobs(model: &Llama, prompt: &[u32], forced: &[u32]) -> Result<Vec<f64>> {
    if prompt.is_empty() {
        return Err(ModelError::Generation("the prompt is empty".into()));
    }
    let vocab = model.config.vocab_size;
    if let Some(t) = forced.iter().find(|&&t| t as usize >= vocab) {
        return Err(ModelError::Generation(format!(
            "token {t} is outside the vocabulary of {vocab}"
        )));
    }
    let used = prompt.len() + forced.len();
    let window = model.config.max_position_embeddings;
    if used > window {
        return Err(ModelError::Generation(format!(
            "prompt + forced tokens are {used}, more than the model's context window of {window}"
        )));
    }
    let mut cache = model.new_cache(vec![0]);
    cache.reserve(used);
    let mut hidden = model.step_chunked(&[prompt.to_vec()], &mut cache);
    let mut out = Vec::with_capacity(forced.len());
    for (k, &t) in forced.iter().enumerate() {
        let logits = model.logits(hidden.unsqueeze_dim(1)).squeeze_dim::<2>(1);
        let row = &host_rows(logits)?[0];
        let max = row.iter().fold(f32::NEG_INFINITY, |a, &v| a.max(v)) as f64;
        let sum: f64 = row.iter().map(|&v| (v as f64 - max).exp()).sum();
        out.push(row[t as usize] as f64 - max - sum.ln());
        if k + 1 == forced.len() {
            break;
        }
        hidden = model.step(&[vec![t]], &mut cache);
    }
    Ok(out)
}

fn left_pad(rows: &[Vec<u32>], len: usize, pad_id: u32) -> Vec<Vec<u32>> {
    rows.iter()
        .map(|p| {
            let mut r = vec![pad_id; len - p.len()];
            r.extend_from_slice(p);
            r
        })
        .collect()
}

/// Generates continuations of `prefix + suffixes[i]` for every `i`, reusing `prefix_cache` (the
/// cache of the shared prefix, from [`Llama::prefill`]) instead of prefilling the prefix once per
/// row. Suffixes are left-padded after the prefix and the padding masked, so each row computes
/// what [`generate`] computes on its full prompt.
pub fn generate_after_prefix(
    model: &Llama,
    prefix_cache: &KvCache,
    suffixes: &[Vec<u32>],
    cfg: &GenerationConfig,
) -> Result<Generation> {
    if suffixes.is_empty() {
        return Ok(Generation::default());
    }
    if let Some(i) = suffixes.iter().position(Vec::is_empty) {
        return Err(ModelError::Generation(format!("suffix #{i} is empty")));
    }
    if prefix_cache.batch() != 1 || prefix_cache.pads[0] != 0 {
        return Err(ModelError::Generation(
            "a shared prefix cache must hold one unpadded row".into(),
        ));
    }
    let longest = suffixes.iter().map(Vec::len).max().unwrap_or(0);
    let used = prefix_cache.len + longest;
    let window = model.config.max_position_embeddings;
    if used > window {
        return Err(ModelError::Generation(format!(
            "prefix + question is {used} tokens, more than the model's context window of {window}"
        )));
    }
    let pad_id = cfg.stop_ids.first().copied().unwrap_or(0);
    // Every slot this generation can fill, reserved as the prefix is copied for each row.
    let slots = used + budget(model, used, cfg);
    let mut cache = prefix_cache.repeat(suffixes.len(), slots);
    cache.pads = suffixes.iter().map(|p| longest - p.len()).collect();
    cache.pad_start = prefix_cache.len;
    let rows = left_pad(suffixes, longest, pad_id);
    let prefill_tokens = suffixes.iter().map(Vec::len).sum();
    decode(model, cache, rows, used, prefill_tokens, cfg)
}

/// New tokens a generation can make after `used` slots: its limit, or what is left of the
/// context window.
fn budget(model: &Llama, used: usize, cfg: &GenerationConfig) -> usize {
    cfg.max_new_tokens
        .min(model.config.max_position_embeddings - used)
}

/// Prefills `rows` into `cache` (which fixes their padding) and decodes; `used` is the slots
/// the prompts take.
fn decode(
    model: &Llama,
    mut cache: KvCache,
    rows: Vec<Vec<u32>>,
    used: usize,
    prefill_tokens: usize,
    cfg: &GenerationConfig,
) -> Result<Generation> {
    let _products = ProductScope::set(cfg.matmul);
    let budget = budget(model, used, cfg);
    let mut sampler = Sampler::new(cfg.sampling.clone());
    let b = rows.len();
    let mut out = Generation {
        tokens: vec![Vec::new(); b],
        stopped: vec![false; b],
        prefill_tokens,
        ..Default::default()
    };
    if budget == 0 {
        return Ok(out);
    }
    // Every slot this generation can fill, allocated once (the CPU backend's host buffers).
    cache.reserve(used + budget);
    let t0 = Instant::now();
    let mut hidden = model.step_chunked(&rows, &mut cache);
    let mut t_decode = None;
    for step in 0..budget {
        let logits = model.logits(hidden.unsqueeze_dim(1)).squeeze_dim::<2>(1);
        let next: Vec<u32> = if sampler.is_greedy() {
            argmax_rows(logits)?
        } else {
            host_rows(logits)?
                .iter()
                .map(|r| sampler.pick(r) as u32)
                .collect()
        };
        if step == 0 {
            out.prefill_secs = t0.elapsed().as_secs_f64();
            t_decode = Some(Instant::now());
        }
        for (i, &tok) in next.iter().enumerate() {
            if out.stopped[i] || out.tokens[i].len() > step {
                continue;
            }
            if cfg.stop_ids.contains(&tok) {
                out.stopped[i] = true;
            } else {
                out.tokens[i].push(tok);
                if step > 0 {
                    out.decode_tokens += 1;
                }
            }
        }
        let live = (0..b).any(|i| !out.stopped[i] && out.tokens[i].len() == step + 1);
        if !live || step + 1 == budget {
            break;
        }
        // Finished rows keep being fed (their outputs are ignored) so that the batch stays whole.
        let feed: Vec<Vec<u32>> = next.iter().map(|&t| vec![t]).collect();
        hidden = model.step(&feed, &mut cache);
    }
    if let Some(t) = t_decode {
        out.decode_secs = t.elapsed().as_secs_f64();
    }
    Ok(out)
}
