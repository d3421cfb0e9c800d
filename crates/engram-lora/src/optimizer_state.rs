//! The optimizer state of a checkpoint: [`AdamW`]'s moments in `optimizer.safetensors`, written
//! tensor by tensor from the device (one tensor in host memory at a time: at rank 2048 on
//! Llama-3.1-8B the moments are 43 GB). Tensors are named after their factor,
//! `model.layers.3.self_attn.q_proj.lora_A.exp_avg` / `.exp_avg_sq`, in engram's `[in, out]`
//! orientation (PEFT's factors transposed: `lora_A` moments are `[in, r]`), f32; the header's
//! metadata holds the step count and the hyper-parameters.
//!
//! Checkpoints written before this format hold Burn's record instead (`optimizer.bpk`); those
//! are read too, so that runs started by an older engram resume where they were.

use std::collections::HashMap;
use std::path::Path;

use burn::module::ParamId;
use burn::tensor::{DType, Tensor, TensorData};
use engram_checkpoint::write_safetensors_lazily_with;
use engram_checkpoint::{SafetensorsCheckpoint, TensorSource};
use engram_model::Llama;

use crate::adamw::{AdamW, AdamWSettings, Moments};
use crate::error::{LoraError, Result};
use crate::peft::streamed;

/// The optimizer state file of a checkpoint.
pub const OPTIMIZER_STATE: &str = "optimizer.safetensors";
/// Burn's optimizer record, as checkpoints of earlier engram versions hold it.
pub const LEGACY_OPTIMIZER_STATE: &str = "optimizer.bpk";

const MOMENTS: [&str; 2] = ["exp_avg", "exp_avg_sq"];

/// Writes `optim`'s state for the factors of `model` to `path` (atomically).
pub fn save(optim: &AdamW, model: &Llama, path: &Path) -> Result<()> {
    let mut tensors = Vec::new();
    for (name, p) in model.adapter_factors() {
        let Some(m) = optim.moments(p.id) else {
            continue;
        };
        for (which, t) in MOMENTS.iter().zip([&m.exp_avg, &m.exp_avg_sq]) {
            tensors.push((format!("{name}.{which}"), streamed(t.clone())));
        }
    }
    let s = optim.settings();
    let metadata = HashMap::from([
        ("optimizer".to_string(), "adamw".to_string()),
        ("step".to_string(), optim.steps().to_string()),
        ("beta_1".to_string(), s.beta_1.to_string()),
        ("beta_2".to_string(), s.beta_2.to_string()),
        ("epsilon".to_string(), s.epsilon.to_string()),
        ("weight_decay".to_string(), s.weight_decay.to_string()),
    ]);
    Ok(write_safetensors_lazily_with(path, tensors, metadata)?)
}

/// Reads the optimizer state of the checkpoint directory `dir` for the adapters attached to
/// `model` (its `optimizer.safetensors`, else an older engram's `optimizer.bpk`), onto the
/// model's device. Every factor must find both moments of its shape, and every stored tensor
/// its factor; anything else is an error naming the file and the tensor.
pub fn load(dir: &Path, model: &Llama, settings: AdamWSettings) -> Result<AdamW> {
    let path = dir.join(OPTIMIZER_STATE);
    if !path.exists() {
        let legacy = dir.join(LEGACY_OPTIMIZER_STATE);
        if legacy.exists() {
            return load_legacy(&legacy, model, settings);
        }
    }
    let bad = |problem: String| LoraError::Resume {
        path: path.clone(),
        problem,
    };
    let st = SafetensorsCheckpoint::open_files(path.clone(), vec![path.clone()])
        .map_err(|e| bad(e.to_string()))?;
    let steps: u64 = st
        .metadata()
        .get("step")
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| bad("no `step` in the header's metadata".into()))?;
    let device = model.device().inner();
    let mut moments = HashMap::new();
    let mut expected = std::collections::BTreeSet::new();
    // A state of step 0 holds no moments (no factor has had a gradient yet).
    let factors = if steps == 0 {
        Vec::new()
    } else {
        model.adapter_factors()
    };
    for (name, p) in factors {
        let shape = p.shape().dims::<2>();
        let mut read = |which: &str| -> Result<Tensor<2>> {
            let key = format!("{name}.{which}");
            expected.insert(key.clone());
            let t = st.read(&key).map_err(|e| bad(e.to_string()))?;
            if t.shape != shape {
                return Err(bad(format!(
                    "{key} is {:?}, its factor {:?} (state of another rank or model?)",
                    t.shape, shape
                )));
            }
            Ok(Tensor::from_data(
                TensorData::new(t.to_f32(), shape),
                (&device, DType::F32),
            ))
        };
        let exp_avg = read(MOMENTS[0])?;
        let exp_avg_sq = read(MOMENTS[1])?;
        moments.insert(
            p.id,
            Moments {
                exp_avg,
                exp_avg_sq,
            },
        );
    }
    if let Some(extra) = st.names().into_iter().find(|n| !expected.contains(n)) {
        return Err(bad(format!(
            "{extra} belongs to no adapter of the model (state of another model or targets?)"
        )));
    }
    Ok(AdamW::from_state(settings, steps, moments))
}

/// Reads Burn's optimizer record (`{param id}.momentum.moment_1`, `.moment_2` and the scalar
/// `.momentum.time` per factor), as engram wrote it before `optimizer.safetensors`.
fn load_legacy(path: &Path, model: &Llama, settings: AdamWSettings) -> Result<AdamW> {
    let bad = |problem: String| LoraError::Resume {
        path: path.to_path_buf(),
        problem,
    };
    let reader = burn_pack::Reader::from_file_exact(path)
        .map_err(|e| bad(format!("Burn optimizer record: {e:?}")))?;
    let steps = reader
        .scalars()
        .iter()
        .filter(|(k, _)| k.ends_with(".momentum.time"))
        .filter_map(|(_, v)| u64::try_from(*v).ok())
        .max()
        .unwrap_or(0);
    let mut stored: HashMap<String, Tensor<2>> = HashMap::new();
    let device = model.device().inner();
    for t in reader
        .into_tensors()
        .map_err(|e| bad(format!("Burn optimizer record: {e:?}")))?
    {
        let (name, dtype, shape, _, bytes) = t
            .into_parts()
            .map_err(|e| bad(format!("Burn optimizer record: {e:?}")))?;
        // Every moment is a factor's matrix (a tensor of another rank would panic below).
        if shape.len() != 2 {
            return Err(bad(format!(
                "{name} has shape {shape:?}; a factor's moment is a matrix"
            )));
        }
        let data = TensorData::from_bytes(bytes, shape, dtype);
        let t: Tensor<2> = Tensor::from_data(data, (&device, DType::F32));
        stored.insert(name, t);
    }
    let mut moments: HashMap<ParamId, Moments> = HashMap::new();
    for (name, p) in model.adapter_factors() {
        let id = p.id.val();
        let mut take = |leaf: &str| -> Result<Option<Tensor<2>>> {
            let Some(t) = stored.remove(&format!("{id}.momentum.{leaf}")) else {
                return Ok(None);
            };
            if t.dims() != p.shape().dims::<2>() {
                return Err(bad(format!(
                    "the {leaf} of {name} is {:?}, the factor {:?}",
                    t.dims(),
                    p.shape().dims::<2>()
                )));
            }
            Ok(Some(t))
        };
        match (take("moment_1")?, take("moment_2")?) {
            (Some(exp_avg), Some(exp_avg_sq)) => {
                moments.insert(
                    p.id,
                    Moments {
                        exp_avg,
                        exp_avg_sq,
                    },
                );
            }
            (None, None) if steps == 0 => {}
            _ => return Err(bad(format!("no AdamW moments for {name}"))),
        }
    }
    if let Some(extra) = stored.keys().next() {
        return Err(bad(format!("{extra} belongs to no adapter of the model")));
    }
    Ok(AdamW::from_state(settings, steps, moments))
}
