//! The GGUF container: header, metadata key/values and tensor directory, memory-mapped.
//! Format: <https://github.com/ggml-org/ggml/blob/master/docs/gguf.md> (versions 2 and 3).

use std::collections::BTreeMap;
use std::fs::File;
use std::path::{Path, PathBuf};

use memmap2::Mmap;

use super::dequant::{GgmlType, ggml_type_name};
use super::value::GgufValue;
use crate::{CheckpointError, Result};

/// One tensor of the directory, in GGML's dimension order (`dims[0]` innermost).
#[derive(Debug, Clone)]
pub struct GgufTensor {
    /// GGUF tensor name (e.g. `blk.0.attn_q.weight`).
    pub name: String,
    /// Dimensions, innermost first (GGML `ne`).
    pub dims: Vec<u64>,
    /// GGML type id.
    pub type_id: u32,
    /// Byte offset of the payload from the file start.
    pub offset: usize,
}

impl GgufTensor {
    /// Number of elements.
    pub fn numel(&self) -> usize {
        self.dims.iter().product::<u64>() as usize
    }

    /// The shape in row-major (PyTorch/HF) order: GGML dims reversed.
    pub fn hf_shape(&self) -> Vec<usize> {
        self.dims.iter().rev().map(|&d| d as usize).collect()
    }
}

/// A parsed, memory-mapped GGUF file.
pub struct GgufFile {
    path: PathBuf,
    mmap: Mmap,
    /// Metadata key/values.
    pub metadata: BTreeMap<String, GgufValue>,
    /// Tensors by GGUF name.
    pub tensors: BTreeMap<String, GgufTensor>,
}

struct Cursor<'a> {
    buf: &'a [u8],
    pos: usize,
    path: &'a Path,
}

impl<'a> Cursor<'a> {
    fn err(&self, message: impl Into<String>) -> CheckpointError {
        CheckpointError::Gguf {
            path: self.path.to_path_buf(),
            message: message.into(),
        }
    }

    fn take(&mut self, n: usize, what: &str) -> Result<&'a [u8]> {
        let end = self.pos.checked_add(n).filter(|&e| e <= self.buf.len());
        match end {
            Some(end) => {
                let s = &self.buf[self.pos..end];
                self.pos = end;
                Ok(s)
            }
            None => Err(self.err(format!(
                "truncated: {what} needs {n} bytes at offset {}, file has {}",
                self.pos,
                self.buf.len()
            ))),
        }
    }

    fn u32(&mut self, what: &str) -> Result<u32> {
        Ok(u32::from_le_bytes(self.take(4, what)?.try_into().unwrap()))
    }

    fn u64(&mut self, what: &str) -> Result<u64> {
        Ok(u64::from_le_bytes(self.take(8, what)?.try_into().unwrap()))
    }

    fn string(&mut self, what: &str) -> Result<String> {
        let n = self.u64(what)? as usize;
        let bytes = self.take(n, what)?;
        String::from_utf8(bytes.to_vec()).map_err(|_| self.err(format!("{what} is not UTF-8")))
    }

    fn value(&mut self, ty: u32, what: &str, depth: usize) -> Result<GgufValue> {
        Ok(match ty {
            0 => GgufValue::U64(self.take(1, what)?[0] as u64),
            1 => GgufValue::I64(self.take(1, what)?[0] as i8 as i64),
            2 => GgufValue::U64(u16::from_le_bytes(self.take(2, what)?.try_into().unwrap()) as u64),
            3 => GgufValue::I64(i16::from_le_bytes(self.take(2, what)?.try_into().unwrap()) as i64),
            4 => GgufValue::U64(self.u32(what)? as u64),
            5 => GgufValue::I64(self.u32(what)? as i32 as i64),
            6 => GgufValue::F64(f32::from_bits(self.u32(what)?) as f64),
            7 => GgufValue::Bool(self.take(1, what)?[0] != 0),
            8 => GgufValue::String(self.string(what)?),
            9 => {
                if depth > 4 {
                    return Err(self.err(format!("{what}: arrays nested too deep")));
                }
                let elem = self.u32(what)?;
                let n = self.u64(what)? as usize;
                // Each element takes at least one byte: a count larger than the file is corrupt.
                if n > self.buf.len() - self.pos {
                    return Err(self.err(format!("truncated: {what} claims {n} array elements")));
                }
                // Grown as elements are read: a corrupt count in a large file must not ask for
                // gigabytes up front.
                let mut v = Vec::with_capacity(n.min(1 << 16));
                for _ in 0..n {
                    v.push(self.value(elem, what, depth + 1)?);
                }
                GgufValue::Array(v)
            }
            10 => GgufValue::U64(self.u64(what)?),
            11 => GgufValue::I64(self.u64(what)? as i64),
            12 => GgufValue::F64(f64::from_bits(self.u64(what)?)),
            other => return Err(self.err(format!("{what}: unknown metadata value type {other}"))),
        })
    }
}

impl GgufFile {
    /// Opens and parses `path`; the tensor payloads stay mapped, unread.
    pub fn open(path: &Path) -> Result<Self> {
        let file = File::open(path).map_err(|e| CheckpointError::io(path, e))?;
        // SAFETY: read-only map, see SafetensorsCheckpoint::open_files.
        let mmap = unsafe { Mmap::map(&file) }.map_err(|e| CheckpointError::io(path, e))?;
        let (metadata, tensors) = Self::parse(&mmap, path)?;
        Ok(Self {
            path: path.to_path_buf(),
            mmap,
            metadata,
            tensors,
        })
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    #[allow(clippy::type_complexity)]
    fn parse(
        buf: &[u8],
        path: &Path,
    ) -> Result<(BTreeMap<String, GgufValue>, BTreeMap<String, GgufTensor>)> {
        let mut c = Cursor { buf, pos: 0, path };
        let magic = c.take(4, "magic")?;
        if magic != b"GGUF" {
            return Err(c.err(format!("bad magic {magic:?}, expected \"GGUF\"")));
        }
        let version = c.u32("version")?;
        if !(2..=3).contains(&version) {
            return Err(c.err(format!(
                "unsupported GGUF version {version} (2 or 3 expected)"
            )));
        }
        let n_tensors = c.u64("tensor count")? as usize;
        let n_kv = c.u64("metadata count")? as usize;
        let mut metadata = BTreeMap::new();
        for i in 0..n_kv {
            let key = c.string(&format!("metadata key #{i}"))?;
            let ty = c.u32(&key)?;
            let v = c.value(ty, &key, 0)?;
            metadata.insert(key, v);
        }
        let mut infos = Vec::new();
        for i in 0..n_tensors {
            let name = c.string(&format!("tensor name #{i}"))?;
            let nd = c.u32(&name)? as usize;
            if !(1..=4).contains(&nd) {
                return Err(c.err(format!("tensor {name}: {nd} dimensions (1 to 4)")));
            }
            let mut dims = Vec::with_capacity(nd);
            for _ in 0..nd {
                dims.push(c.u64(&name)?);
            }
            // Every size computed from the dimensions later (up to 8 bytes an element) fits a
            // usize.
            let fits = dims
                .iter()
                .try_fold(1u64, |n, &d| n.checked_mul(d))
                .and_then(|n| usize::try_from(n).ok())
                .is_some_and(|n| n.checked_mul(8).is_some());
            if !fits {
                return Err(c.err(format!(
                    "tensor {name}: dimensions {dims:?} hold more elements than can be addressed"
                )));
            }
            let type_id = c.u32(&name)?;
            let offset = c.u64(&name)? as usize;
            infos.push((name, dims, type_id, offset));
        }
        let align = metadata
            .get("general.alignment")
            .and_then(|v| v.as_u64())
            .unwrap_or(32);
        let data_start = usize::try_from(align)
            .ok()
            .filter(|&a| a > 0)
            .and_then(|a| c.pos.div_ceil(a).checked_mul(a))
            .ok_or_else(|| c.err(format!("general.alignment is {align} (a positive size)")))?;
        let mut tensors = BTreeMap::new();
        for (name, dims, type_id, rel) in infos {
            let offset = data_start.checked_add(rel).ok_or_else(|| {
                c.err(format!(
                    "truncated: tensor {name} starts at byte {rel} past the data, beyond any file"
                ))
            })?;
            let t = GgufTensor {
                name: name.clone(),
                dims,
                type_id,
                offset,
            };
            // Supported types must fit inside the file; unsupported ones are reported when read.
            if let Ok(ty) = GgmlType::from_id(type_id) {
                let row = t.dims.first().copied().unwrap_or(1) as usize;
                if !row.is_multiple_of(ty.block_elems()) {
                    return Err(c.err(format!(
                        "tensor {name}: rows of {row} elements are not a whole number of {} \
                         blocks ({} elements)",
                        ggml_type_name(type_id),
                        ty.block_elems()
                    )));
                }
                let n = t.numel();
                let size = ty.bytes_for(n).ok_or_else(|| {
                    c.err(format!(
                        "tensor {name}: {n} elements is not a whole number of {} blocks",
                        ggml_type_name(type_id)
                    ))
                })?;
                if t.offset.checked_add(size).is_none_or(|end| end > buf.len()) {
                    return Err(c.err(format!(
                        "truncated: tensor {name} needs {size} bytes from byte {}, file has {}",
                        t.offset,
                        buf.len()
                    )));
                }
            }
            tensors.insert(name, t);
        }
        Ok((metadata, tensors))
    }

    /// A metadata value or a named error.
    pub fn meta(&self, key: &str) -> Result<&GgufValue> {
        self.metadata
            .get(key)
            .ok_or_else(|| CheckpointError::BadKey {
                origin: self.path.display().to_string(),
                key: key.to_string(),
                problem: "is missing from the GGUF metadata".into(),
            })
    }

    /// Dequantizes tensor `name` to f32 (row-major in HF order).
    pub fn read_f32(&self, name: &str) -> Result<Vec<f32>> {
        let (ty, bytes) = self.raw(name)?;
        Ok(super::dequant::dequantize(ty, bytes))
    }

    /// The type and stored bytes of tensor `name` (memory-mapped, not copied).
    pub fn raw(&self, name: &str) -> Result<(GgmlType, &[u8])> {
        let t = self
            .tensors
            .get(name)
            .ok_or_else(|| CheckpointError::MissingTensor {
                name: name.to_string(),
                origin: self.path.display().to_string(),
            })?;
        let ty = GgmlType::from_id(t.type_id).map_err(|ty| CheckpointError::UnsupportedDType {
            name: name.to_string(),
            origin: self.path.display().to_string(),
            dtype: format!("GGUF type {ty} (id {})", t.type_id),
        })?;
        let size = ty.bytes_for(t.numel()).expect("checked at open");
        Ok((ty, &self.mmap[t.offset..t.offset + size]))
    }
}
