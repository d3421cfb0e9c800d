//! Per-epoch training checkpoints: `OUT/checkpoints/epoch-NNNN/` holds the adapter (PEFT
//! layout), the AdamW state ([`crate::optimizer_state`]: `optimizer.safetensors`, tensor by
//! tensor) and `trainer_state.json` (epoch, optimizer step, the run's fingerprint, per-epoch records).
//! Batch order and dropout masks are functions of (seed, epoch, step), so these are all the
//! state a resumed run needs to end on the same adapter as an uninterrupted one.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::{LoraError, Result};
use crate::optimizer_state::OPTIMIZER_STATE;
use crate::peft::{PeftAdapter, load_adapter};
use crate::record::EpochRecord;
use engram_io as atomic;

/// The trainer's counters at the end of an epoch.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct TrainerState {
    /// Epochs done.
    pub epoch: usize,
    /// Optimizer steps done.
    pub global_step: usize,
    /// Hash of everything that must match for a resume (settings, facts, model).
    pub fingerprint: String,
    /// Records of the finished epochs.
    pub epochs: Vec<EpochRecord>,
}

/// The directory of the checkpoints of a run.
pub fn checkpoints_dir(out: &Path) -> PathBuf {
    out.join("checkpoints")
}

fn epoch_dir(out: &Path, epoch: usize) -> PathBuf {
    checkpoints_dir(out).join(format!("epoch-{epoch:04}"))
}

const STATE: &str = "trainer_state.json";

/// Writes the checkpoint of epoch `state.epoch` (into a temporary directory renamed into place)
/// and removes older ones beyond `keep`. `write_adapter` writes the adapter's PEFT files into the
/// directory it is given ([`crate::peft::save_adapter`]: tensor by tensor), `write_optimizer`
/// the optimizer state's file at the path it is given ([`crate::optimizer_state::save`]: tensor
/// by tensor too), so no host copy of the whole state is made.
pub fn save(
    out: &Path,
    write_adapter: impl FnOnce(&Path) -> Result<()>,
    write_optimizer: impl FnOnce(&Path) -> Result<()>,
    state: &TrainerState,
    keep: usize,
) -> Result<PathBuf> {
    let dst = epoch_dir(out, state.epoch);
    let tmp = atomic::sibling(&dst, ".tmp");
    if tmp.exists() {
        std::fs::remove_dir_all(&tmp).map_err(LoraError::io(&tmp))?;
    }
    write_adapter(&tmp)?;
    write_optimizer(&tmp.join(OPTIMIZER_STATE))?;
    let json = serde_json::to_vec_pretty(state).expect("json");
    atomic::write_file(&tmp.join(STATE), &json)?;
    atomic::replace_dir(&tmp, &dst)?;
    let mut all = list(out)?;
    all.sort();
    let keep = keep.max(1);
    if all.len() > keep {
        for (_, old) in &all[..all.len() - keep] {
            std::fs::remove_dir_all(old).map_err(LoraError::io(old))?;
        }
    }
    Ok(dst)
}

/// Finished checkpoints as `(epoch, dir)`.
fn list(out: &Path) -> Result<Vec<(usize, PathBuf)>> {
    let root = checkpoints_dir(out);
    if !root.exists() {
        return Ok(Vec::new());
    }
    let mut found = Vec::new();
    for entry in std::fs::read_dir(&root).map_err(LoraError::io(&root))? {
        let entry = entry.map_err(LoraError::io(&root))?;
        let name = entry.file_name().to_string_lossy().to_string();
        if let Some(n) = name.strip_prefix("epoch-")
            && let Ok(epoch) = n.parse::<usize>()
            && entry.path().join(STATE).exists()
        {
            found.push((epoch, entry.path()));
        }
    }
    Ok(found)
}

/// A checkpoint read back for resuming.
pub struct Restored {
    /// Where it was read from.
    pub dir: PathBuf,
    /// Counters and records.
    pub state: TrainerState,
    /// The adapter (the optimizer state, `dir`'s [`crate::optimizer_state`], is read once the
    /// adapter is attached).
    pub adapter: PeftAdapter,
}

/// The newest checkpoint under `out`, if any.
pub fn latest(out: &Path) -> Result<Option<Restored>> {
    let Some((_, dir)) = list(out)?.into_iter().max() else {
        return Ok(None);
    };
    let state_path = dir.join(STATE);
    let text = std::fs::read_to_string(&state_path).map_err(LoraError::io(&state_path))?;
    let state: TrainerState = serde_json::from_str(&text).map_err(|e| LoraError::Resume {
        path: state_path.clone(),
        problem: format!("corrupt trainer state: {e}"),
    })?;
    let adapter = load_adapter(&dir)?;
    Ok(Some(Restored {
        dir,
        state,
        adapter,
    }))
}
