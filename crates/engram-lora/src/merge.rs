//! `engram merge`: base + adapter written as an HF checkpoint directory (sharded safetensors with
//! an index, config, generation config and tokenizer files) — for serving ranks above vLLM's
//! LoRA limit of 512. Tensors stream one at a time from the base; an adapted weight becomes
//! `W + s·B·A` with the product computed on `device` in f32 and rounded once to the base's
//! stored format (PEFT rounds the delta to the weight dtype before adding; the difference is at
//! most one rounding step of that format). Quantized GGUF bases are written as F32.

use std::collections::BTreeMap;
use std::path::Path;

use burn::tensor::{DType, Device, Tensor, TensorData};
use engram_checkpoint::{Checkpoint, FloatFormat, HostTensor, decode_f32};
use serde_json::{Value, json};

use crate::atomic;
use crate::error::{LoraError, Result};
use crate::peft::PeftAdapter;

/// Default largest shard (bytes), as transformers' `save_pretrained` ("5GB").
pub const DEFAULT_SHARD_BYTES: usize = 5_000_000_000;

fn encode(values: &[f32], format: FloatFormat) -> Vec<u8> {
    match format {
        FloatFormat::F32 => values.iter().flat_map(|x| x.to_le_bytes()).collect(),
        FloatFormat::F16 => values
            .iter()
            .flat_map(|&x| half::f16::from_f32(x).to_le_bytes())
            .collect(),
        FloatFormat::BF16 => values
            .iter()
            .flat_map(|&x| half::bf16::from_f32(x).to_le_bytes())
            .collect(),
    }
}

fn dtype_of(format: FloatFormat) -> safetensors::Dtype {
    match format {
        FloatFormat::F32 => safetensors::Dtype::F32,
        FloatFormat::F16 => safetensors::Dtype::F16,
        FloatFormat::BF16 => safetensors::Dtype::BF16,
    }
}

/// `W[out, in] + s · B[out, r] · A[r, in]` on `device`.
fn merged(
    w: &HostTensor,
    a: &[f32],
    b: &[f32],
    rank: usize,
    scaling: f64,
    device: &Device,
) -> Vec<f32> {
    let (out, inp) = (w.shape[0], w.shape[1]);
    let w = Tensor::<2>::from_data(
        TensorData::new(decode_f32(&w.bytes, w.format), [out, inp]),
        (device, DType::F32),
    );
    let a = Tensor::<2>::from_data(
        TensorData::new(a.to_vec(), [rank, inp]),
        (device, DType::F32),
    );
    let b = Tensor::<2>::from_data(
        TensorData::new(b.to_vec(), [out, rank]),
        (device, DType::F32),
    );
    (w + b.matmul(a).mul_scalar(scaling))
        .into_data()
        .try_into_vec_as::<f32>()
        .expect("f32")
}

fn write_json(path: &Path, v: &Value) -> Result<()> {
    atomic::write_file(path, &serde_json::to_vec_pretty(v).expect("json"))
}

/// Writes `base` with `adapter` folded in to `out` (which must not exist or be empty). Returns
/// the number of shards written. Without an adapter this converts any readable checkpoint (e.g.
/// a GGUF file, dequantized) into an HF directory.
pub fn merge_to_hf(
    base: &Checkpoint,
    adapter: Option<&PeftAdapter>,
    out: &Path,
    shard_bytes: usize,
    device: &Device,
) -> Result<usize> {
    if out.exists()
        && std::fs::read_dir(out)
            .map_err(LoraError::io(out))?
            .next()
            .is_some()
    {
        return Err(LoraError::BadSetting(format!(
            "{} exists and is not empty; merge writes a fresh directory",
            out.display()
        )));
    }
    let tmp = atomic::sibling(out, ".partial");
    if tmp.exists() {
        std::fs::remove_dir_all(&tmp).map_err(LoraError::io(&tmp))?;
    }
    std::fs::create_dir_all(&tmp).map_err(LoraError::io(&tmp))?;
    let src = base.tensors.as_ref();
    let mut by_weight = BTreeMap::new();
    let factors = adapter.map_or(&[][..], |a| &a.factors[..]);
    let adapter_path = adapter.map(|a| a.path.clone()).unwrap_or_default();
    for f in factors {
        let name = format!("model.layers.{}.{}.weight", f.layer, f.target.path());
        match src.info(&name) {
            Some(info) if info.shape == [f.d_out, f.d_in] => {}
            Some(info) => {
                return Err(LoraError::adapter(
                    &adapter_path,
                    format!(
                        "{name} is {:?} in {}, the adapter expects [{}, {}]",
                        info.shape,
                        src.origin(),
                        f.d_out,
                        f.d_in
                    ),
                ));
            }
            None => {
                return Err(LoraError::adapter(
                    &adapter_path,
                    format!("adapts {name}, which {} does not have", src.origin()),
                ));
            }
        }
        by_weight.insert(name, f);
    }
    let scaling = adapter.map_or(1.0, |a| a.config.scaling());
    let mut names = src.names();
    names.sort();
    // Group tensors into shards by stored size.
    let mut shards: Vec<Vec<String>> = vec![Vec::new()];
    let mut size = 0usize;
    for name in &names {
        let bytes = src
            .info(name)
            .map_or(0, |i| i.shape.iter().product::<usize>())
            * src.read_format(name).map_or(4, FloatFormat::size);
        if size + bytes > shard_bytes && !shards.last().expect("one").is_empty() {
            shards.push(Vec::new());
            size = 0;
        }
        size += bytes;
        shards.last_mut().expect("one").push(name.clone());
    }
    let n = shards.len();
    let mut weight_map = serde_json::Map::new();
    let mut total = 0usize;
    for (k, shard) in shards.iter().enumerate() {
        let file = if n == 1 {
            "model.safetensors".to_string()
        } else {
            format!("model-{:05}-of-{n:05}.safetensors", k + 1)
        };
        let mut tensors = Vec::new();
        for name in shard {
            let t = src.read(name)?;
            let bytes = match by_weight.get(name) {
                Some(f) => encode(&merged(&t, &f.a, &f.b, f.rank, scaling, device), t.format),
                None => t.bytes.clone(),
            };
            total += bytes.len();
            tensors.push((name.clone(), t.shape.clone(), t.format, bytes));
            weight_map.insert(name.clone(), json!(file));
        }
        let views: Vec<(String, safetensors::tensor::TensorView<'_>)> = tensors
            .iter()
            .map(|(name, shape, format, bytes)| {
                (
                    name.clone(),
                    safetensors::tensor::TensorView::new(dtype_of(*format), shape.clone(), bytes)
                        .expect("consistent sizes"),
                )
            })
            .collect();
        let mut meta = std::collections::HashMap::new();
        meta.insert("format".to_string(), "pt".to_string());
        let path = tmp.join(&file);
        safetensors::serialize_to_file(views, Some(meta), &path)
            .map_err(|e| LoraError::adapter(&path, e.to_string()))?;
    }
    if n > 1 {
        write_json(
            &tmp.join("model.safetensors.index.json"),
            &json!({"metadata": {"total_size": total}, "weight_map": weight_map}),
        )?;
    }
    write_json(&tmp.join("config.json"), &base.config)?;
    if let Some(g) = &base.generation_config {
        write_json(&tmp.join("generation_config.json"), g)?;
    }
    if let Some(t) = &base.tokenizer.tokenizer_json {
        atomic::write_file(&tmp.join("tokenizer.json"), t.as_bytes())?;
    }
    if let Some(c) = &base.tokenizer.tokenizer_config {
        write_json(&tmp.join("tokenizer_config.json"), c)?;
    }
    atomic::replace_dir(&tmp, out)?;
    Ok(n)
}
