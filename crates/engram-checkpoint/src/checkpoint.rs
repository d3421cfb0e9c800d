//! One entry point for every kind of model location: an HF directory, a `.gguf` file, or a hub
//! repo id. Whatever the source, the result looks like an HF checkpoint.

use std::path::{Path, PathBuf};

use engram_io::{Progress, Quiet};
use serde_json::Value;

use crate::gguf::GgufLlama;
use crate::safetensors_dir::SafetensorsCheckpoint;
use crate::tensor_source::TensorSource;
use crate::{CheckpointError, Result};

/// The file transformers saves a tokenizer's chat template to (since 4.47).
pub const CHAT_TEMPLATE_FILE: &str = "chat_template.jinja";

/// The tokenizer files of a checkpoint (raw `tokenizer.json` text and parsed config).
#[derive(Debug, Clone, Default)]
pub struct TokenizerFiles {
    /// Contents of `tokenizer.json` (or its GGUF-derived equivalent).
    pub tokenizer_json: Option<String>,
    /// `tokenizer_config.json` (chat template, special tokens).
    pub tokenizer_config: Option<Value>,
    /// Where the files came from, for error messages.
    pub origin: String,
}

impl TokenizerFiles {
    /// The tokenizer files of an HF directory (`tokenizer.json`, `tokenizer_config.json`,
    /// `chat_template.jinja`, each optional here), which need no weights beside them. The chat
    /// template of `chat_template.jinja` — where transformers since 4.47 saves it, leaving it
    /// out of `tokenizer_config.json` — is the config's `chat_template`, and wins over one the
    /// config holds, as it does in transformers.
    pub fn from_dir(dir: &Path) -> Result<Self> {
        let tok_path = dir.join("tokenizer.json");
        let tokenizer_json = if tok_path.is_file() {
            Some(
                std::fs::read_to_string(&tok_path)
                    .map_err(|e| CheckpointError::io(&tok_path, e))?,
            )
        } else {
            None
        };
        let mut tokenizer_config = read_optional_json(&dir.join("tokenizer_config.json"))?;
        let template_path = dir.join(CHAT_TEMPLATE_FILE);
        if template_path.is_file() {
            let template = std::fs::read_to_string(&template_path)
                .map_err(|e| CheckpointError::io(&template_path, e))?;
            let config = tokenizer_config.get_or_insert_with(|| Value::Object(Default::default()));
            let Some(fields) = config.as_object_mut() else {
                return Err(CheckpointError::Json {
                    path: dir.join("tokenizer_config.json"),
                    message: "not a JSON object".into(),
                });
            };
            fields.insert("chat_template".into(), Value::String(template));
        }
        Ok(Self {
            tokenizer_json,
            tokenizer_config,
            origin: dir.display().to_string(),
        })
    }
}

/// A model checkpoint opened for loading.
pub struct Checkpoint {
    /// What the user named (path or repo id) and where it resolved to.
    pub origin: String,
    /// `config.json` (or its GGUF-derived equivalent).
    pub config: Value,
    /// Where `config` came from, for error messages.
    pub config_origin: String,
    /// `generation_config.json`, when present.
    pub generation_config: Option<Value>,
    /// Tokenizer files.
    pub tokenizer: TokenizerFiles,
    /// The weights.
    pub tensors: Box<dyn TensorSource>,
    /// llama.cpp's per-frequency rope divisors (GGUF `rope_freqs.weight`), when present.
    pub rope_freq_factors: Option<Vec<f32>>,
    /// Whether the weights were dequantized from a quantized GGUF file.
    pub from_gguf: bool,
}

fn read_json(path: &Path) -> Result<Value> {
    let text = std::fs::read_to_string(path).map_err(|e| CheckpointError::io(path, e))?;
    serde_json::from_str(&text).map_err(|e| CheckpointError::Json {
        path: path.to_path_buf(),
        message: e.to_string(),
    })
}

fn read_optional_json(path: &Path) -> Result<Option<Value>> {
    if path.is_file() {
        read_json(path).map(Some)
    } else {
        Ok(None)
    }
}

impl Checkpoint {
    /// Opens `spec`: an HF model directory, a `.gguf` file, a registry model alias (e.g.
    /// `smollm2-135m-instruct`, fetched into engram's cache when absent), or a hub repo id
    /// (`owner/name[@revision]`, downloaded into the HF cache, or read from it when offline).
    pub fn open(spec: &str) -> Result<Self> {
        Self::open_with(spec, &Quiet)
    }

    /// [`Checkpoint::open`], reporting a registry model's download to `progress`.
    pub fn open_with(spec: &str, progress: &dyn Progress) -> Result<Self> {
        let path = PathBuf::from(spec);
        if path.is_dir() {
            return Self::open_dir(&path);
        }
        if path.is_file() {
            if path
                .extension()
                .is_some_and(|e| e.eq_ignore_ascii_case("gguf"))
            {
                return Self::open_gguf(&path);
            }
            if let Some(dir) = path.parent()
                && path
                    .extension()
                    .is_some_and(|e| e == "safetensors" || e == "json")
            {
                return Self::open_dir(if dir.as_os_str().is_empty() {
                    Path::new(".")
                } else {
                    dir
                });
            }
            return Err(CheckpointError::Unresolvable {
                spec: spec.into(),
                reason: "a file that is neither .gguf nor part of an HF directory".into(),
            });
        }
        if let Some(m) = crate::model_store::find(spec) {
            let path = m.ensure(progress)?;
            let mut ckpt = Self::open_gguf(&path)?;
            ckpt.origin = format!("{spec} ({})", path.display());
            return Ok(ckpt);
        }
        if crate::hub::looks_like_repo_id(spec) {
            let dir = crate::hub::resolve_repo(spec)?;
            let mut ckpt = Self::open_dir(&dir)?;
            ckpt.origin = format!("{spec} ({})", dir.display());
            return Ok(ckpt);
        }
        Err(CheckpointError::Unresolvable {
            spec: spec.into(),
            reason: "no such file or directory, and not an `owner/name` hub repo id".into(),
        })
    }

    /// Opens an HF model directory (config.json + safetensors + tokenizer files).
    pub fn open_dir(dir: &Path) -> Result<Self> {
        let config_path = dir.join("config.json");
        if !config_path.is_file() {
            return Err(CheckpointError::MissingFile {
                what: "config.json",
                path: config_path,
            });
        }
        let config = read_json(&config_path)?;
        let tensors = SafetensorsCheckpoint::open_dir(dir)?;
        Ok(Self {
            origin: dir.display().to_string(),
            config,
            config_origin: config_path.display().to_string(),
            generation_config: read_optional_json(&dir.join("generation_config.json"))?,
            tokenizer: TokenizerFiles::from_dir(dir)?,
            tensors: Box::new(tensors),
            rope_freq_factors: None,
            from_gguf: false,
        })
    }

    /// Opens a llama-architecture GGUF file.
    pub fn open_gguf(path: &Path) -> Result<Self> {
        let g = GgufLlama::open(path)?;
        let origin = path.display().to_string();
        // A GGUF without tokenizer metadata still loads as a model (tokenizing then fails with
        // a named error).
        let has_tokenizer = g.file().metadata.contains_key("tokenizer.ggml.tokens");
        let tokenizer = TokenizerFiles {
            tokenizer_json: has_tokenizer
                .then(|| g.tokenizer_json().map(|j| j.to_string()))
                .transpose()?,
            tokenizer_config: has_tokenizer.then(|| g.tokenizer_config()).transpose()?,
            origin: format!("{origin} (GGUF metadata)"),
        };
        Ok(Self {
            origin: origin.clone(),
            config: g.config().clone(),
            config_origin: format!("{origin} (GGUF metadata)"),
            generation_config: Some(g.generation_config()),
            tokenizer,
            rope_freq_factors: g.rope_freq_factors()?,
            tensors: Box::new(g),
            from_gguf: true,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// transformers ≥ 4.47 saves the chat template to `chat_template.jinja` and leaves it out of
    /// `tokenizer_config.json`; where both hold one, the file's wins.
    #[test]
    fn the_chat_template_file_is_the_configs_template() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(CHAT_TEMPLATE_FILE), "{{ bos_token }}NEW").unwrap();
        let t = TokenizerFiles::from_dir(dir.path()).unwrap();
        assert_eq!(
            t.tokenizer_config.unwrap()["chat_template"],
            "{{ bos_token }}NEW"
        );
        std::fs::write(
            dir.path().join("tokenizer_config.json"),
            r#"{"bos_token": "<s>", "chat_template": "OLD"}"#,
        )
        .unwrap();
        let c = TokenizerFiles::from_dir(dir.path())
            .unwrap()
            .tokenizer_config
            .unwrap();
        assert_eq!(c["chat_template"], "{{ bos_token }}NEW");
        assert_eq!(c["bos_token"], "<s>");
        std::fs::remove_file(dir.path().join(CHAT_TEMPLATE_FILE)).unwrap();
        let c = TokenizerFiles::from_dir(dir.path())
            .unwrap()
            .tokenizer_config
            .unwrap();
        assert_eq!(c["chat_template"], "OLD");
    }
}
