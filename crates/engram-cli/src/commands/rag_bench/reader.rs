//! `engram rag-bench --reader …`: the reader (an endpoint, or a model engram runs itself) and
//! its judge, built from the flags for [`engram_bench::ReaderBench`]; calls cached under
//! `--reader-cache`.

use std::path::PathBuf;

use anyhow::{Result, bail};
use engram_bench::{ReaderBench, check_reader_k};
use engram_experiments::LocalLlm;
use engram_judge::ClientConfig;
use engram_qa::{Llm, OpenAiLlm};

use super::RagBenchArgs;
use crate::judge_arg::judge_preset;
use crate::progress::Bars;

/// The reader `--reader` names.
fn reader(a: &RagBenchArgs, value: &str, bars: &Bars) -> Result<Box<dyn Llm>> {
    Ok(match value.strip_prefix("local:") {
        Some(model) => Box::new(LocalLlm::load(model, &a.bench.backend, "f32", bars)?),
        None => {
            let Some(model) = &a.reader_model else {
                bail!("--reader {value} needs --reader-model (the model name at that endpoint)");
            };
            let mut client = ClientConfig::new(value);
            client.api_key_env = a.api_key_env.clone();
            Box::new(OpenAiLlm::new(client, model)?)
        }
    })
}

/// The reader side of `--reader`: the reader, its judge and where its calls are cached,
/// checked before anything loads.
pub fn build(a: &RagBenchArgs, value: &str, bars: &Bars) -> Result<ReaderBench> {
    let Some(judge_value) = &a.judge else {
        bail!(
            "--reader needs --judge (exact-match, token-f1, gold-recall or a preset file such as configs/judges/small-judge.toml)"
        );
    };
    check_reader_k(&a.reader_k, a.bench.k.iter().copied().max().unwrap_or(0))?;
    let cache_dir: PathBuf = a
        .reader_cache
        .clone()
        .unwrap_or_else(|| a.bench.corpus.join("reader-cache"));
    let (preset, base) = judge_preset(judge_value)?;
    let judge = preset.build(&base, &cache_dir.join("judge"))?;
    Ok(ReaderBench {
        llm: reader(a, value, bars)?,
        judge,
        k: a.reader_k.clone(),
        max_tokens: a.reader_max_tokens,
        cache_dir,
        prompts: a.prompts.clone(),
    })
}
