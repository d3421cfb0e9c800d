//! A GGUF base with an adapter folded in, written as a GGUF file llama.cpp loads on its own:
//! every metadata key (tokenizer and chat template included) and every weight the adapter does
//! not touch copied as stored (quantized blocks stay as they were); each adapted weight
//! dequantized, `W + scaling · B·A` ([`crate::merge`]'s product) added in llama.cpp's layout
//! (the delta's q/k rows permuted as llama.cpp's converter permutes the base's) and stored as
//! F16.

use std::collections::BTreeMap;
use std::path::Path;

use burn::tensor::Device;
use engram_checkpoint::gguf::{GgufLlama, GgufWriter, WriterTensor};
use engram_checkpoint::{FloatFormat, encode_f32};

use crate::error::{LoraError, Result};
use crate::gguf_adapter::{BaseShape, gguf_weight, refuse_existing};
use crate::merge::delta;
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

/// Writes `base` (a llama GGUF file) with `adapter` folded in to `out`, atomically; an existing
/// `out` is refused unless `force`. Every adapted weight is checked against the file first;
/// the low-rank products run on `device`.
pub fn merge_to_gguf(
    base: &Path,
    adapter: &PeftAdapter,
    out: &Path,
    force: bool,
    device: &Device,
) -> Result<MergedGguf> {
    refuse_existing(out, force)?;
    let llama = GgufLlama::open(base)?;
    let origin = base.display().to_string();
    let base_shape = BaseShape::of(llama.config(), &origin)?;
    base_shape.check(adapter, &origin)?;
    let by_name: BTreeMap<String, &PeftFactors> = adapter
        .factors
        .iter()
        .map(|f| (gguf_weight(f), f))
        .collect();
    let (file, scaling) = (llama.file(), adapter.config.scaling());
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
                let d =
                    base_shape.llama_cpp_rows(f.target, delta(f, scaling, device), f.d_out, f.d_in);
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
