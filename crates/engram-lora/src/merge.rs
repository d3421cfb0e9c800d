//! `engram merge`: base + adapter written as an HF checkpoint directory (through
//! [`engram_checkpoint::hf_writer`]: sharded safetensors with an index, config, generation
//! config and tokenizer files) — for serving ranks above vLLM's LoRA limit of 512. Tensors
//! stream one at a time from the base; an adapted weight becomes `W + s·B·A` with the product
//! computed on `device` in f32 and rounded once to the base's stored format (PEFT rounds the
//! delta to the weight dtype before adding; the difference is at most one rounding step of that
//! format). Quantized GGUF bases are written as F32.

use std::collections::BTreeMap;
use std::path::Path;

use burn::tensor::{DType, Device, Tensor, TensorData};
use engram_checkpoint::write_hf_dir;
use engram_checkpoint::{Checkpoint, HostTensor, encode_f32};

use crate::error::{LoraError, Result};
use crate::peft::{PeftAdapter, PeftFactors};

/// `s · B[out, r] · A[r, in]` of `f`, computed on `device` in f32: row-major `[out, in]`.
pub(crate) fn delta(f: &PeftFactors, scaling: f64, device: &Device) -> Vec<f32> {
    let host = |v: &[f32], shape: [usize; 2]| {
        Tensor::<2>::from_data(TensorData::new(v.to_vec(), shape), (device, DType::F32))
    };
    let a = host(&f.a, [f.rank, f.d_in]);
    let b = host(&f.b, [f.d_out, f.rank]);
    b.matmul(a)
        .mul_scalar(scaling)
        .into_data()
        .try_into_vec_as::<f32>()
        .expect("f32")
}

/// `W[out, in] + s · B[out, r] · A[r, in]` ([`delta`] on `device`), in `W`'s stored format.
fn merged(w: &HostTensor, f: &PeftFactors, scaling: f64, device: &Device) -> HostTensor {
    let mut sum = w.to_f32();
    for (x, d) in sum.iter_mut().zip(delta(f, scaling, device)) {
        *x += d;
    }
    HostTensor {
        shape: w.shape.clone(),
        format: w.format,
        bytes: encode_f32(&sum, w.format),
    }
}

/// The adapter's factors by the name of the weight they adapt, each checked against `base`.
fn factors_by_weight<'a>(
    base: &Checkpoint,
    adapter: &'a PeftAdapter,
) -> Result<BTreeMap<String, &'a PeftFactors>> {
    let src = base.tensors.as_ref();
    let mut by_weight = BTreeMap::new();
    for f in &adapter.factors {
        let name = format!("model.layers.{}.{}.weight", f.layer, f.target.path());
        match src.info(&name) {
            Some(info) if info.shape == [f.d_out, f.d_in] => {}
            Some(info) => {
                return Err(LoraError::adapter(
                    &adapter.path,
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
                    &adapter.path,
                    format!("adapts {name}, which {} does not have", src.origin()),
                ));
            }
        }
        by_weight.insert(name, f);
    }
    Ok(by_weight)
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
    let (by_weight, scaling) = match adapter {
        Some(a) => (factors_by_weight(base, a)?, a.config.scaling()),
        None => (BTreeMap::new(), 1.0),
    };
    Ok(write_hf_dir(base, out, shard_bytes, |name, t| {
        by_weight.get(name).map(|f| merged(t, f, scaling, device))
    })?)
}
