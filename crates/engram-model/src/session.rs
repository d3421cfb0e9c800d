//! A model ready to use: checkpoint opened, tokenizer built, weights on a device — the one
//! loader behind every command and the sweep.

use std::time::Instant;

use engram_checkpoint::Checkpoint;
use engram_io::Progress;
use engram_tokenizer::ChatTokenizer;

use crate::device::open_device;
use crate::error::{ModelError, Result};
use crate::llama::Llama;
use crate::load::WeightDType;

/// What to load.
#[derive(Debug, Clone, PartialEq)]
pub struct SessionSpec {
    /// An HF directory, a `.gguf` file, a registry alias or a hub repo id.
    pub model: String,
    /// `cpu`, `wgpu`, `cuda[:N]` or `auto`.
    pub backend: String,
    /// Weight dtype on the device: `f32`, `bf16` or `f16`.
    pub dtype: String,
    /// Put the model on the backend's autodiff device (to train adapters).
    pub train: bool,
}

/// A loaded model with its tokenizer.
pub struct Session {
    /// The model.
    pub model: Llama,
    /// Its tokenizer (chat template included).
    pub tokenizer: ChatTokenizer,
    /// The ids that end an answer (the checkpoint's end-of-turn and eos ids).
    pub stop_ids: Vec<u32>,
    /// What was named and where it resolved to.
    pub origin: String,
    /// The checkpoint's `config.json` (or its GGUF metadata's equivalent): for writers that
    /// need the base's shape (an adapter exported for llama.cpp) without opening it again.
    pub config: serde_json::Value,
    /// Seconds the load took.
    pub load_s: f64,
}

impl Session {
    /// Loads `spec`, reporting the load (and a registry model's download) to `progress`.
    pub fn load(spec: &SessionSpec, progress: &dyn Progress) -> Result<Self> {
        let t0 = Instant::now();
        let device = open_device(&spec.backend)?;
        let device = if spec.train {
            device.autodiff()
        } else {
            device
        };
        let dtype = WeightDType::parse(&spec.dtype).ok_or_else(|| ModelError::UnknownDtype {
            name: spec.dtype.clone(),
        })?;
        progress.begin(&format!("loading {}", spec.model), None);
        let loaded = (|| {
            let ckpt = Checkpoint::open_with(&spec.model, progress)?;
            let tokenizer = ChatTokenizer::from_files(&ckpt.tokenizer)?;
            let model = Llama::load(&ckpt, dtype, &device)?;
            Ok::<_, ModelError>((ckpt.origin, ckpt.config, tokenizer, model))
        })();
        progress.end();
        let (origin, config, tokenizer, model) = loaded?;
        let stop_ids = tokenizer.stop_ids(&model.config.eos_token_ids);
        Ok(Self {
            model,
            tokenizer,
            stop_ids,
            origin,
            config,
            load_s: t0.elapsed().as_secs_f64(),
        })
    }

    /// The line a command shows once the model is loaded.
    pub fn summary(&self, backend: &str) -> String {
        format!(
            "loaded {} ({:.1} M parameters, {} layers) on {backend} in {:.1}s",
            self.origin,
            self.model.config.num_parameters() as f64 / 1e6,
            self.model.config.num_hidden_layers,
            self.load_s
        )
    }
}
