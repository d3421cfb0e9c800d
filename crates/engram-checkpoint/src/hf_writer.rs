//! Writing checkpoints in HF's layout: a safetensors payload (metadata `format: pt`, as torch
//! writes it, so transformers and PEFT load it), and a whole HF model directory — tensors in
//! shards of at most `shard_bytes` with `model.safetensors.index.json` when there are several
//! (transformers' `save_pretrained` naming), config, generation config and tokenizer files. The
//! directory is written as `OUT.partial` and renamed into place, so a half-written checkpoint
//! never appears under its name.

use std::collections::HashMap;
use std::path::Path;

use serde_json::{Value, json};

use crate::checkpoint::Checkpoint;
use crate::host_tensor::{FloatFormat, HostTensor};
use crate::{CheckpointError, Result};

/// Default largest shard (bytes), as transformers' `save_pretrained` ("5GB").
pub const DEFAULT_SHARD_BYTES: usize = 5_000_000_000;

fn dtype_of(format: FloatFormat) -> safetensors::Dtype {
    match format {
        FloatFormat::F32 => safetensors::Dtype::F32,
        FloatFormat::F16 => safetensors::Dtype::F16,
        FloatFormat::BF16 => safetensors::Dtype::BF16,
    }
}

fn write_error(path: &Path, message: impl ToString) -> CheckpointError {
    CheckpointError::Write {
        path: path.to_path_buf(),
        message: message.to_string(),
    }
}

/// An atomic write's error as this crate's (naming the file).
pub(crate) fn atomic(e: engram_io::AtomicError) -> CheckpointError {
    write_error(&e.path, e.source)
}

fn views<'a>(
    tensors: &'a [(String, HostTensor)],
    path: &Path,
) -> Result<Vec<(String, safetensors::tensor::TensorView<'a>)>> {
    tensors
        .iter()
        .map(|(name, t)| {
            safetensors::tensor::TensorView::new(dtype_of(t.format), t.shape.clone(), &t.bytes)
                .map(|v| (name.clone(), v))
                .map_err(|e| write_error(path, format!("tensor {name}: {e}")))
        })
        .collect()
}

fn pt_metadata() -> Option<HashMap<String, String>> {
    Some(HashMap::from([("format".to_string(), "pt".to_string())]))
}

/// A tensor whose bytes are produced only when [`write_safetensors_lazily`] reaches it.
pub struct LazyTensor<'a> {
    /// Shape.
    pub shape: Vec<usize>,
    /// Stored format.
    pub format: FloatFormat,
    /// Produces the tensor's little-endian bytes (`shape`'s element count × the format's size).
    pub bytes: Box<dyn Fn() -> Vec<u8> + 'a>,
}

impl safetensors::View for LazyTensor<'_> {
    fn dtype(&self) -> safetensors::Dtype {
        dtype_of(self.format)
    }

    fn shape(&self) -> &[usize] {
        &self.shape
    }

    fn data(&self) -> std::borrow::Cow<'_, [u8]> {
        let bytes = (self.bytes)();
        assert_eq!(bytes.len(), self.data_len(), "a lazy tensor's bytes");
        std::borrow::Cow::Owned(bytes)
    }

    fn data_len(&self) -> usize {
        self.shape.iter().product::<usize>() * self.format.size()
    }
}

/// Writes `tensors` as a safetensors file at `path` (metadata `format: pt`), producing each
/// tensor's bytes only as it is written, so that one tensor at a time is in host memory (a
/// rank-2048 adapter of an 8B model is 21 GB). The safetensors crate writes a temporary sibling
/// and renames it into place, so `path` is never half-written.
pub fn write_safetensors_lazily(path: &Path, tensors: Vec<(String, LazyTensor<'_>)>) -> Result<()> {
    write_safetensors_lazily_with(path, tensors, HashMap::new())
}

/// [`write_safetensors_lazily`] with `metadata` added to the header's `__metadata__` (beside
/// `format: pt`).
pub fn write_safetensors_lazily_with(
    path: &Path,
    tensors: Vec<(String, LazyTensor<'_>)>,
    metadata: HashMap<String, String>,
) -> Result<()> {
    let mut all = pt_metadata().unwrap_or_default();
    all.extend(metadata);
    safetensors::serialize_to_file(tensors, Some(all), path).map_err(|e| write_error(path, e))?;
    finish_written(path)
}

/// Finishes a file the safetensors crate wrote through a temporary file: the permissions a
/// plain `File::create` gives under the usual umask (0644, where the temporary file is
/// owner-only), so that the tools and users the checkpoint is for (a vLLM container under
/// another uid) can read it; and its data synced to disk, which the crate does not do — a
/// training checkpoint's older epochs are deleted once a newer one is in place, so the newer one
/// must survive a crash of the machine.
fn finish_written(path: &Path) -> Result<()> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o644))
            .map_err(|e| CheckpointError::io(path, e))?;
    }
    std::fs::File::open(path)
        .and_then(|f| f.sync_all())
        .map_err(|e| CheckpointError::io(path, e))
}

/// The safetensors bytes of `tensors` (metadata `format: pt`); `path` names the destination in
/// errors.
pub fn safetensors_bytes(tensors: &[(String, HostTensor)], path: &Path) -> Result<Vec<u8>> {
    safetensors::serialize(views(tensors, path)?, pt_metadata()).map_err(|e| write_error(path, e))
}

fn write_json(path: &Path, v: &Value) -> Result<()> {
    engram_io::write_file(path, &serde_json::to_vec_pretty(v).expect("json")).map_err(atomic)
}

/// Groups `names` (sorted) into shards of at most `shard_bytes` stored bytes each; a tensor
/// larger than a shard gets one of its own.
fn plan_shards(base: &Checkpoint, names: &[String], shard_bytes: usize) -> Vec<Vec<String>> {
    let src = base.tensors.as_ref();
    let mut shards: Vec<Vec<String>> = vec![Vec::new()];
    let mut size = 0usize;
    for name in names {
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
    shards
}

/// Writes every tensor of `base` to a fresh HF directory `out` (which must not exist or be
/// empty), each as `transform(name, tensor)` returns it (`None`: as stored), beside `base`'s
/// config, generation config and tokenizer files. Tensors stream one at a time. Returns the
/// number of shards written.
pub fn write_hf_dir(
    base: &Checkpoint,
    out: &Path,
    shard_bytes: usize,
    mut transform: impl FnMut(&str, &HostTensor) -> Option<HostTensor>,
) -> Result<usize> {
    if out.exists()
        && std::fs::read_dir(out)
            .map_err(|e| CheckpointError::io(out, e))?
            .next()
            .is_some()
    {
        return Err(write_error(
            out,
            "exists and is not empty; a checkpoint is written into a fresh directory",
        ));
    }
    let tmp = engram_io::sibling(out, ".partial");
    if tmp.exists() {
        std::fs::remove_dir_all(&tmp).map_err(|e| CheckpointError::io(&tmp, e))?;
    }
    std::fs::create_dir_all(&tmp).map_err(|e| CheckpointError::io(&tmp, e))?;
    let src = base.tensors.as_ref();
    let mut names = src.names();
    names.sort();
    let shards = plan_shards(base, &names, shard_bytes);
    let n = shards.len();
    let mut weight_map = serde_json::Map::new();
    let mut total = 0usize;
    for (k, shard) in shards.iter().enumerate() {
        let file = if n == 1 {
            crate::safetensors_dir::SINGLE_FILE.to_string()
        } else {
            format!("model-{:05}-of-{n:05}.safetensors", k + 1)
        };
        let path = tmp.join(&file);
        let mut tensors = Vec::with_capacity(shard.len());
        for name in shard {
            let t = src.read(name)?;
            let t = transform(name, &t).unwrap_or(t);
            total += t.bytes.len();
            weight_map.insert(name.clone(), json!(file));
            tensors.push((name.clone(), t));
        }
        safetensors::serialize_to_file(views(&tensors, &path)?, pt_metadata(), &path)
            .map_err(|e| write_error(&path, e))?;
        finish_written(&path)?;
    }
    if n > 1 {
        write_json(
            &tmp.join(crate::safetensors_dir::INDEX_FILE),
            &json!({"metadata": {"total_size": total}, "weight_map": weight_map}),
        )?;
    }
    write_json(&tmp.join("config.json"), &base.config)?;
    if let Some(g) = &base.generation_config {
        write_json(&tmp.join("generation_config.json"), g)?;
    }
    if let Some(t) = &base.tokenizer.tokenizer_json {
        engram_io::write_file(&tmp.join("tokenizer.json"), t.as_bytes()).map_err(atomic)?;
    }
    if let Some(c) = &base.tokenizer.tokenizer_config {
        write_json(&tmp.join("tokenizer_config.json"), c)?;
    }
    engram_io::replace_dir(&tmp, out).map_err(atomic)?;
    Ok(n)
}
