//! HF safetensors checkpoints: one `model.safetensors`, or shards listed by
//! `model.safetensors.index.json`. Files are memory-mapped; a tensor's bytes are copied out only
//! when it is read.

use std::collections::BTreeMap;
use std::fs::File;
use std::path::{Path, PathBuf};

use memmap2::Mmap;
use safetensors::{Dtype, SafeTensors};

use crate::tensor_source::{TensorInfo, TensorSource};
use crate::{CheckpointError, FloatFormat, HostTensor, Result};

/// File name of a single-file checkpoint.
pub const SINGLE_FILE: &str = "model.safetensors";
/// File name of a sharded checkpoint's index.
pub const INDEX_FILE: &str = "model.safetensors.index.json";

struct Entry {
    file: usize,
    dtype: Dtype,
    shape: Vec<usize>,
    start: usize,
    end: usize,
}

/// A memory-mapped safetensors checkpoint (one file or several shards).
pub struct SafetensorsCheckpoint {
    origin: PathBuf,
    files: Vec<(PathBuf, Mmap)>,
    entries: BTreeMap<String, Entry>,
    metadata: BTreeMap<String, String>,
}

impl SafetensorsCheckpoint {
    /// Opens the weights of an HF model directory: the index and its shards when an index exists,
    /// else `model.safetensors`.
    pub fn open_dir(dir: &Path) -> Result<Self> {
        let index = dir.join(INDEX_FILE);
        if index.is_file() {
            return Self::open_index(&index);
        }
        let single = dir.join(SINGLE_FILE);
        if !single.is_file() {
            return Err(CheckpointError::MissingFile {
                what: "model weights (model.safetensors or model.safetensors.index.json)",
                path: dir.to_path_buf(),
            });
        }
        Self::open_files(dir.to_path_buf(), vec![single])
    }

    /// Opens a sharded checkpoint through its index file.
    pub fn open_index(index: &Path) -> Result<Self> {
        let text = std::fs::read_to_string(index).map_err(|e| CheckpointError::io(index, e))?;
        let json: serde_json::Value =
            serde_json::from_str(&text).map_err(|e| CheckpointError::Json {
                path: index.to_path_buf(),
                message: e.to_string(),
            })?;
        let map = json
            .get("weight_map")
            .and_then(|m| m.as_object())
            .ok_or_else(|| CheckpointError::BadKey {
                origin: index.display().to_string(),
                key: "weight_map".into(),
                problem: "is missing or not an object".into(),
            })?;
        let dir = index.parent().unwrap_or(Path::new("."));
        let mut shards: Vec<String> = Vec::new();
        for (tensor, shard) in map {
            let shard = shard.as_str().ok_or_else(|| CheckpointError::BadKey {
                origin: index.display().to_string(),
                key: format!("weight_map.{tensor}"),
                problem: "is not a string".into(),
            })?;
            if !shards.iter().any(|s| s == shard) {
                shards.push(shard.to_string());
            }
        }
        shards.sort();
        let mut paths = Vec::new();
        for shard in &shards {
            let p = dir.join(shard);
            if !p.is_file() {
                return Err(CheckpointError::MissingShard {
                    index: index.to_path_buf(),
                    shard: shard.clone(),
                });
            }
            paths.push(p);
        }
        let ckpt = Self::open_files(index.to_path_buf(), paths)?;
        for (tensor, shard) in map {
            let Some(entry) = ckpt.entries.get(tensor) else {
                return Err(CheckpointError::MissingTensor {
                    name: tensor.clone(),
                    origin: format!("{} (the shard the index names)", map[tensor]),
                });
            };
            let found = &ckpt.files[entry.file].0;
            if shard.as_str().is_none_or(|shard| *found != dir.join(shard)) {
                return Err(CheckpointError::BadKey {
                    origin: index.display().to_string(),
                    key: format!("weight_map.{tensor}"),
                    problem: format!("names {shard}, but the tensor is in {}", found.display()),
                });
            }
        }
        Ok(ckpt)
    }

    /// Opens the given safetensors files as one checkpoint.
    pub fn open_files(origin: PathBuf, paths: Vec<PathBuf>) -> Result<Self> {
        let mut files: Vec<(PathBuf, Mmap)> = Vec::new();
        let mut entries: BTreeMap<String, Entry> = BTreeMap::new();
        let mut metadata = BTreeMap::new();
        for (i, path) in paths.into_iter().enumerate() {
            let file = File::open(&path).map_err(|e| CheckpointError::io(&path, e))?;
            // SAFETY: the map is read-only; a checkpoint rewritten while it is open is the
            // user's race, as with every mmap-based loader (transformers included).
            let mmap = unsafe { Mmap::map(&file) }.map_err(|e| CheckpointError::io(&path, e))?;
            let bad = |e: safetensors::SafeTensorError| CheckpointError::Safetensors {
                path: path.clone(),
                message: e.to_string(),
            };
            let st = SafeTensors::deserialize(&mmap).map_err(bad)?;
            let (_, header) = SafeTensors::read_metadata(&mmap).map_err(bad)?;
            metadata.extend(header.metadata().clone().unwrap_or_default());
            let base = mmap.as_ptr() as usize;
            for (name, view) in st.tensors() {
                // Two shards holding one tensor: which is meant is not for the loader to guess.
                if let Some(first) = entries.get(&name) {
                    return Err(CheckpointError::Safetensors {
                        path: path.clone(),
                        message: format!(
                            "tensor {name} is also in {}",
                            files[first.file].0.display()
                        ),
                    });
                }
                let start = view.data().as_ptr() as usize - base;
                let end = start + view.data().len();
                entries.insert(
                    name,
                    Entry {
                        file: i,
                        dtype: view.dtype(),
                        shape: view.shape().to_vec(),
                        start,
                        end,
                    },
                );
            }
            drop(st);
            files.push((path, mmap));
        }
        Ok(Self {
            origin,
            files,
            entries,
            metadata,
        })
    }

    /// The `__metadata__` of the header (of all files, merged).
    pub fn metadata(&self) -> &BTreeMap<String, String> {
        &self.metadata
    }

    fn entry(&self, name: &str) -> Result<&Entry> {
        self.entries
            .get(name)
            .ok_or_else(|| CheckpointError::MissingTensor {
                name: name.to_string(),
                origin: self.origin(),
            })
    }
}

fn float_format(dtype: Dtype) -> Option<FloatFormat> {
    match dtype {
        Dtype::F32 => Some(FloatFormat::F32),
        Dtype::F16 => Some(FloatFormat::F16),
        Dtype::BF16 => Some(FloatFormat::BF16),
        _ => None,
    }
}

impl TensorSource for SafetensorsCheckpoint {
    fn origin(&self) -> String {
        self.origin.display().to_string()
    }

    fn names(&self) -> Vec<String> {
        self.entries.keys().cloned().collect()
    }

    fn info(&self, name: &str) -> Option<TensorInfo> {
        self.entries.get(name).map(|e| TensorInfo {
            shape: e.shape.clone(),
            stored_as: format!("{:?}", e.dtype),
        })
    }

    fn read(&self, name: &str) -> Result<HostTensor> {
        let e = self.entry(name)?;
        let format = float_format(e.dtype).ok_or_else(|| CheckpointError::UnsupportedDType {
            name: name.to_string(),
            origin: self.files[e.file].0.display().to_string(),
            dtype: format!("{:?}", e.dtype),
        })?;
        let bytes = self.files[e.file].1[e.start..e.end].to_vec();
        Ok(HostTensor {
            shape: e.shape.clone(),
            format,
            bytes,
        })
    }

    fn read_format(&self, name: &str) -> Option<FloatFormat> {
        self.entries.get(name).and_then(|e| float_format(e.dtype))
    }
}
