//! Opening a model for the command line: the [`Session`] loader with a spinner (and a download
//! bar for registry models), then one line saying what was loaded.

use anyhow::{Context, Result};
use clap::Args;
use engram_model::cpu_matmul::QuantizedProduct;
use engram_model::{Session, SessionSpec};

use crate::progress::Bars;

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

impl ModelArgs {
    /// Opens the checkpoint and loads it for inference.
    pub fn load(&self) -> Result<Session> {
        self.load_on(false)
    }

    /// Opens the checkpoint and loads it; `train` puts it on the backend's autodiff device.
    pub fn load_on(&self, train: bool) -> Result<Session> {
        let spec = SessionSpec {
            model: self.model.clone(),
            backend: self.backend.clone(),
            dtype: self.dtype.clone(),
            train,
        };
        let s = Session::load(&spec, &Bars::new(true))
            .with_context(|| format!("loading --model {}", self.model))?;
        eprintln!("{}", s.summary(&self.backend));
        Ok(s)
    }
}

/// `--matmul`: how the CPU multiplies by a GGUF checkpoint's quantized blocks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum MatmulArg {
    /// The blocks dequantized to f32: the dequantized weights' products (transformers'
    /// numbers).
    Exact,
    /// Activations quantized to Q8 blocks and integer dot products with the weight blocks, as
    /// llama.cpp does, for decode at batch ≤ 4: faster, an approximation (greedy tokens can
    /// differ from exact ones).
    Q8,
}

impl MatmulArg {
    /// The model's setting.
    pub fn mode(self) -> QuantizedProduct {
        match self {
            MatmulArg::Exact => QuantizedProduct::Exact,
            MatmulArg::Q8 => QuantizedProduct::Q8,
        }
    }
}
