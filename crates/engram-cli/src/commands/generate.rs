//! `engram generate`: answer a prompt with a model.

use anyhow::{Result, bail};
use clap::Args;
use engram_model::{GenerationConfig, Sampling, generate};
use engram_tokenizer::Message;

use crate::loaded::{MatmulArg, ModelArgs};

/// Arguments of `engram generate`.
#[derive(Args, Debug)]
pub struct GenerateArgs {
    #[command(flatten)]
    pub model: ModelArgs,
    /// The prompt (repeat for a batch).
    #[arg(long, short = 'p', required = true)]
    pub prompt: Vec<String>,
    /// Wrap the prompt in the model's chat template as a user turn.
    #[arg(long)]
    pub chat: bool,
    /// System message (with --chat).
    #[arg(long)]
    pub system: Option<String>,
    /// Most new tokens.
    #[arg(long, default_value_t = 128)]
    pub max_new_tokens: usize,
    /// Sample with this temperature instead of greedy decoding.
    #[arg(long)]
    pub temperature: Option<f32>,
    /// Nucleus mass when sampling (with --temperature; default 1.0, the whole distribution).
    #[arg(long)]
    pub top_p: Option<f32>,
    /// Sampling seed (with --temperature; default 0).
    #[arg(long)]
    pub seed: Option<u64>,
    /// How the CPU multiplies by a GGUF's quantized blocks: exact, or q8 (llama.cpp's integer
    /// dot products: faster decode at batch ≤ 4, an approximation).
    #[arg(long, value_enum, default_value = "exact")]
    pub matmul: MatmulArg,
}

pub fn run(args: GenerateArgs) -> Result<()> {
    if let Some(i) = args.prompt.iter().position(|p| p.trim().is_empty()) {
        bail!("empty prompt (#{}): give some text to --prompt", i + 1);
    }
    // Flags that would be ignored are refused, before the model loads.
    if args.system.is_some() && !args.chat {
        bail!(
            "--system is a chat turn: pass --chat too (the prompt is sent as raw text without it)"
        );
    }
    if !args.temperature.is_some_and(|t| t > 0.0) {
        for (flag, given) in [
            ("--top-p", args.top_p.is_some()),
            ("--seed", args.seed.is_some()),
        ] {
            if given {
                bail!(
                    "{flag} applies to sampling: pass a --temperature above 0 too (decoding is \
                     greedy without one)"
                );
            }
        }
    }
    if let Some(p) = args.top_p.filter(|p| !(*p > 0.0 && *p <= 1.0)) {
        bail!("--top-p {p}: the nucleus mass must be in (0, 1]");
    }
    let loaded = args.model.load()?;
    let tok = &loaded.tokenizer;
    let mut prompts = Vec::new();
    for p in &args.prompt {
        let ids = if args.chat {
            let mut msgs = Vec::new();
            if let Some(s) = &args.system {
                msgs.push(Message::system(s.clone()));
            }
            msgs.push(Message::user(p.clone()));
            tok.encode_chat_prompt(&msgs)?
        } else {
            tok.encode_prompt(p)?
        };
        prompts.push(ids);
    }
    let sampling = match args.temperature {
        Some(t) if t > 0.0 => Sampling::TopP {
            temperature: t,
            top_p: args.top_p.unwrap_or(1.0),
            seed: args.seed.unwrap_or(0),
        },
        _ => Sampling::Greedy,
    };
    let cfg = GenerationConfig {
        max_new_tokens: args.max_new_tokens,
        sampling,
        stop_ids: loaded.stop_ids.clone(),
        matmul: args.matmul.mode(),
    };
    let out = generate(&loaded.model, &prompts, &cfg)?;
    for (i, toks) in out.tokens.iter().enumerate() {
        let text = tok.decode(toks, true)?;
        if prompts.len() > 1 {
            println!("[{}] {}", i + 1, text.trim());
        } else {
            println!("{}", text.trim());
        }
    }
    eprintln!(
        "prefill {} tokens in {:.2}s ({:.1} tok/s); decode {} tokens in {:.2}s ({:.1} tok/s)",
        out.prefill_tokens,
        out.prefill_secs,
        out.prefill_tokens as f64 / out.prefill_secs.max(1e-9),
        out.decode_tokens,
        out.decode_secs,
        out.decode_tokens as f64 / out.decode_secs.max(1e-9)
    );
    Ok(())
}
