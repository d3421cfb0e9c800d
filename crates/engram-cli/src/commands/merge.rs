//! `engram merge`: base + adapter written as an HF checkpoint (sharded safetensors).

use std::path::PathBuf;

use anyhow::Result;
use clap::Args;
use engram_checkpoint::Checkpoint;
use engram_checkpoint::DEFAULT_SHARD_BYTES;
use engram_checkpoint::gguf::GgufMix;
use engram_lora::load_adapter;
use engram_model::device_from_name;

/// Arguments of `engram merge`.
#[derive(Args, Debug)]
pub struct MergeArgs {
    /// The base model (directory, .gguf, alias or hub id).
    #[arg(long, short = 'm', default_value = "smollm2-135m-instruct")]
    pub model: String,
    /// The adapter directory (PEFT layout).
    #[arg(long)]
    pub adapter: PathBuf,
    /// Output directory (must not exist or be empty).
    #[arg(long)]
    pub out: PathBuf,
    /// Largest shard in bytes (an HF directory's; a --gguf output is one file).
    #[arg(long, default_value_t = DEFAULT_SHARD_BYTES, conflicts_with = "gguf")]
    pub shard_bytes: usize,
    /// Backend that computes the low-rank products.
    #[arg(long, default_value = "cpu")]
    pub backend: String,
    /// Write one GGUF file llama.cpp loads instead of an HF directory (`--out` is then the
    /// file), as this llama.cpp file type: the base must be a GGUF file (or a registry alias of
    /// one); adapted weights are stored as the type's rules give them (bytes as llama.cpp's own
    /// quantizer writes), weights the base holds quantized are kept as stored.
    /// One of F16, Q8_0, Q4_K_M (any case).
    #[arg(long, value_parser = GgufMix::parse, value_name = "TYPE")]
    pub gguf: Option<GgufMix>,
    /// Replace a `--gguf` output file that exists.
    #[arg(long, requires = "gguf")]
    pub force: bool,
}

/// The GGUF file `spec` names: a `.gguf` path, or a registry alias (fetched if needed).
fn gguf_path(spec: &str) -> Result<PathBuf> {
    if spec.ends_with(".gguf") {
        return Ok(PathBuf::from(spec));
    }
    match engram_checkpoint::model_store::find(spec) {
        Some(m) => Ok(m.ensure(&crate::progress::Bars::new(true))?),
        None => anyhow::bail!(
            "--model {spec}: merge --gguf folds the adapter into a GGUF base (a .gguf file or a registry alias); for an HF checkpoint, merge without --gguf and convert with llama.cpp's convert_hf_to_gguf.py"
        ),
    }
}

/// Runs `engram merge`.
pub fn run(a: MergeArgs) -> Result<()> {
    let device = device_from_name(&a.backend)?;
    if let Some(mix) = a.gguf {
        let base = gguf_path(&a.model)?;
        let adapter = load_adapter(&a.adapter)?;
        let m = engram_lora::merge_to_gguf(&base, &adapter, &a.out, mix, a.force, &device)?;
        let types: Vec<String> = m.types.iter().map(|(t, n)| format!("{n} {t}")).collect();
        eprintln!(
            "merged {} (rank {}) into {} → {} as {} ({} weights merged, {} converted: {}; {} tensors kept as stored; {:.1} MB); use it with: llama-server -m {}",
            a.adapter.display(),
            adapter.config.rank,
            base.display(),
            a.out.display(),
            mix.name(),
            m.merged,
            m.converted,
            types.join(", "),
            m.copied,
            m.bytes as f64 / 1e6,
            a.out.display()
        );
        return Ok(());
    }
    let ckpt = Checkpoint::open_with(&a.model, &crate::progress::Bars::new(true))?;
    let adapter = load_adapter(&a.adapter)?;
    let shards = engram_lora::merge_to_hf(&ckpt, Some(&adapter), &a.out, a.shard_bytes, &device)?;
    eprintln!(
        "merged {} (rank {}, {} adapted layers) into {} → {} ({shards} shard{})",
        a.adapter.display(),
        adapter.config.rank,
        adapter.factors.len(),
        ckpt.origin,
        a.out.display(),
        if shards == 1 { "" } else { "s" }
    );
    Ok(())
}
