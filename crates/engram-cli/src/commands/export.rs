//! `engram export`: an adapter in another format — llama.cpp's LoRA adapter GGUF, for
//! `llama-server -m base.gguf --lora adapter.gguf` and Ollama's `ADAPTER`.

use std::path::PathBuf;

use anyhow::Result;
use clap::{Args, ValueEnum};
use engram_checkpoint::Checkpoint;
use engram_lora::{GgufAdapterType, load_adapter, write_gguf_adapter};

/// `--format`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ExportFormat {
    /// llama.cpp's LoRA adapter GGUF.
    Gguf,
}

/// `--dtype` of the exported tensors.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ExportDtype {
    /// 16-bit floats (llama.cpp's converter's default).
    F16,
    /// 32-bit floats: the adapter exactly.
    F32,
}

/// Arguments of `engram export`.
#[derive(Args, Debug)]
pub struct ExportArgs {
    /// The adapter directory (PEFT layout, as `engram train` writes it).
    #[arg(long)]
    pub adapter: PathBuf,
    /// The base model the adapter was trained on (directory, .gguf, alias or hub id): its
    /// shape is checked against the adapter's and gives the q/k head layout.
    #[arg(long, short = 'm', default_value = "smollm2-135m-instruct")]
    pub model: String,
    /// The format to write.
    #[arg(long, value_enum, default_value = "gguf")]
    pub format: ExportFormat,
    /// The tensors' float type.
    #[arg(long, value_enum, default_value = "f16")]
    pub dtype: ExportDtype,
    /// The file to write.
    #[arg(long)]
    pub out: PathBuf,
    /// Replace `--out` if it exists.
    #[arg(long)]
    pub force: bool,
}

/// Runs `engram export`.
pub fn run(a: ExportArgs) -> Result<()> {
    let adapter = load_adapter(&a.adapter)?;
    let base = Checkpoint::open_with(&a.model, &crate::progress::Bars::new(true))?;
    let ty = match a.dtype {
        ExportDtype::F16 => GgufAdapterType::F16,
        ExportDtype::F32 => GgufAdapterType::F32,
    };
    let ExportFormat::Gguf = a.format;
    let s = write_gguf_adapter(&adapter, &base.config, &base.origin, &a.out, ty, a.force)?;
    eprintln!(
        "wrote {} (llama.cpp LoRA adapter, {:?}, rank {}, alpha {}, {} tensors, {:.1} MB) for {}; use it with: llama-server -m BASE.gguf --lora {}",
        a.out.display(),
        a.dtype,
        adapter.config.rank,
        s.alpha,
        s.tensors,
        s.bytes as f64 / 1e6,
        base.origin,
        a.out.display()
    );
    Ok(())
}
