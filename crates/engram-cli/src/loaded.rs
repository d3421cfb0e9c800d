//! Opening a model for the command line: checkpoint, tokenizer, weights on a device, with a
//! spinner while it loads.

use std::time::Instant;

use anyhow::{Context, Result};
use clap::Args;
use engram_checkpoint::Checkpoint;
use engram_model::{Llama, WeightDType, device_from_name};
use engram_tokenizer::ChatTokenizer;

/// Options every command that loads a model takes.
#[derive(Args, Debug, Clone)]
pub struct ModelArgs {
    /// A model directory, a .gguf file, a registry alias (smollm2-135m-instruct), or a hub repo
    /// id (owner/name[@revision]).
    #[arg(long, short = 'm', default_value = "smollm2-135m-instruct")]
    pub model: String,
    /// Compute backend: cpu, wgpu, cuda[:N], or auto.
    #[arg(long, default_value = "cpu")]
    pub backend: String,
    /// Weight dtype on the device: f32, bf16 or f16.
    #[arg(long, default_value = "f32")]
    pub dtype: String,
}

/// A model ready to run.
pub struct Loaded {
    pub model: Llama,
    pub tokenizer: ChatTokenizer,
    pub stop_ids: Vec<u32>,
    pub origin: String,
}

impl ModelArgs {
    /// Opens the checkpoint and loads it for inference.
    pub fn load(&self) -> Result<Loaded> {
        self.load_on(false)
    }

    /// Opens the checkpoint and loads it; `autodiff` puts it on the backend's autodiff device
    /// (for training).
    pub fn load_on(&self, autodiff: bool) -> Result<Loaded> {
        let device = device_from_name(&self.backend)?;
        let device = if autodiff { device.autodiff() } else { device };
        let dtype = WeightDType::parse(&self.dtype)
            .with_context(|| format!("unknown --dtype `{}` (f32, bf16, f16)", self.dtype))?;
        let t0 = Instant::now();
        let spinner = indicatif::ProgressBar::new_spinner();
        spinner.set_message(format!("loading {}", self.model));
        spinner.enable_steady_tick(std::time::Duration::from_millis(120));
        let ckpt = Checkpoint::open(&self.model)?;
        let tokenizer = ChatTokenizer::from_files(&ckpt.tokenizer)?;
        let model = Llama::load(&ckpt, dtype, &device)?;
        let stop_ids = tokenizer.stop_ids(&model.config.eos_token_ids);
        spinner.finish_and_clear();
        eprintln!(
            "loaded {} ({:.1} M parameters, {} layers) on {} in {:.1}s",
            ckpt.origin,
            model.config.num_parameters() as f64 / 1e6,
            model.config.num_hidden_layers,
            self.backend,
            t0.elapsed().as_secs_f64()
        );
        Ok(Loaded {
            model,
            tokenizer,
            stop_ids,
            origin: ckpt.origin,
        })
    }
}
