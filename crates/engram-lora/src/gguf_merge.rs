//! A GGUF base with an adapter folded in, written as a GGUF file llama.cpp loads on its own:
//! every metadata key (tokenizer and chat template included) and every weight the adapter does
//! not touch copied as stored (quantized blocks stay as they were); each adapted weight
//! dequantized, `W + scaling · B·A` added in llama.cpp's layout (the delta's q/k rows permuted
//! as llama.cpp's converter permutes the base's) and stored as F16.

use std::collections::BTreeMap;
use std::path::Path;

use engram_checkpoint::gguf::{GgufFile, GgufValue, GgufWriter, WriterTensor, permute_rows};
use engram_checkpoint::{FloatFormat, encode_f32};
use engram_model::LoraTarget;

use crate::error::{LoraError, Result};
use crate::gguf_adapter::{gguf_module, refuse_existing};
use crate::peft::{PeftAdapter, PeftFactors};

/// What was written.
#[derive(Debug, Clone, PartialEq)]
pub struct MergedGguf {
    /// Weights with the adapter folded in (stored as F16).
    pub merged: usize,
    /// Tensors copied as stored.
    pub copied: usize,
    /// Bytes of the file.
    pub bytes: usize,
}

/// `n_out × n_in` delta `scaling · B·A` of `f` (HF row order), row-major.
fn delta(f: &PeftFactors, scaling: f32) -> Vec<f32> {
    let mut d = vec![0f32; f.d_out * f.d_in];
    for o in 0..f.d_out {
        let row = &mut d[o * f.d_in..(o + 1) * f.d_in];
        for r in 0..f.rank {
            let b = f.b[o * f.rank + r] * scaling;
            if b == 0.0 {
                continue;
            }
            let a = &f.a[r * f.d_in..(r + 1) * f.d_in];
            for (x, y) in row.iter_mut().zip(a) {
                *x += b * y;
            }
        }
    }
    d
}

fn head_count(file: &GgufFile, key: &str) -> Option<usize> {
    match file.metadata.get(key) {
        Some(GgufValue::U64(n)) => Some(*n as usize),
        Some(GgufValue::I64(n)) => Some(*n as usize),
        _ => None,
    }
}

/// Writes `base` (a llama GGUF file) with `adapter` folded in to `out`, atomically; an existing
/// `out` is refused unless `force`. Every adapted weight is checked against the file first.
pub fn merge_to_gguf(
    base: &Path,
    adapter: &PeftAdapter,
    out: &Path,
    force: bool,
) -> Result<MergedGguf> {
    refuse_existing(out, force)?;
    let file = GgufFile::open(base)?;
    let arch = file
        .metadata
        .get("general.architecture")
        .and_then(GgufValue::as_str)
        .unwrap_or("");
    if arch != "llama" {
        return Err(LoraError::adapter(
            base,
            format!("is a `{arch}` GGUF; adapters are folded into llama GGUF files only"),
        ));
    }
    let heads = head_count(&file, "llama.attention.head_count")
        .ok_or_else(|| LoraError::adapter(base, "has no llama.attention.head_count"))?;
    let kv_heads = head_count(&file, "llama.attention.head_count_kv").unwrap_or(heads);
    let mut by_name: BTreeMap<String, &PeftFactors> = BTreeMap::new();
    for f in &adapter.factors {
        let name = format!("blk.{}.{}.weight", f.layer, gguf_module(f.target));
        let fits = file
            .tensors
            .get(&name)
            .is_some_and(|t| t.dims == [f.d_in as u64, f.d_out as u64]);
        if !fits {
            return Err(LoraError::adapter(
                &adapter.path,
                format!(
                    "layer {} {}: the adapter is for a {}→{} weight, which {} lacks (made for another base model?)",
                    f.layer,
                    f.target.path(),
                    f.d_in,
                    f.d_out,
                    base.display()
                ),
            ));
        }
        by_name.insert(name, f);
    }
    let scaling = adapter.config.scaling() as f32;
    let mut w = GgufWriter::new();
    for (k, v) in &file.metadata {
        w.meta(k, v.clone());
    }
    let mut tensors: Vec<_> = file.tensors.values().collect();
    tensors.sort_by_key(|t| t.offset);
    let (mut merged, mut copied) = (0, 0);
    for t in tensors {
        let shape: Vec<usize> = t.dims.iter().rev().map(|&d| d as usize).collect();
        match by_name.get(&t.name) {
            Some(f) => {
                let mut weight = file.read_f32(&t.name)?;
                let mut d = delta(f, scaling);
                d = match f.target {
                    LoraTarget::Q => permute_rows(&d, f.d_out, f.d_in, heads),
                    LoraTarget::K => permute_rows(&d, f.d_out, f.d_in, kv_heads),
                    _ => d,
                };
                for (x, y) in weight.iter_mut().zip(&d) {
                    *x += y;
                }
                w.tensor(WriterTensor {
                    name: t.name.clone(),
                    shape,
                    type_id: 1,
                    data: encode_f32(&weight, FloatFormat::F16),
                });
                merged += 1;
            }
            None => {
                let (_, bytes) = file.raw(&t.name)?;
                w.tensor(WriterTensor {
                    name: t.name.clone(),
                    shape,
                    type_id: t.type_id,
                    data: bytes.to_vec(),
                });
                copied += 1;
            }
        }
    }
    let bytes = w.to_bytes();
    engram_io::write_file(out, &bytes).map_err(|e| LoraError::adapter(out, e.to_string()))?;
    Ok(MergedGguf {
        merged,
        copied,
        bytes: bytes.len(),
    })
}
