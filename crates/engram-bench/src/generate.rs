//! `engram bench generate`: greedy prefill and decode tokens/s, beside transformers' and
//! llama.cpp's on the same machine and GGUF file, measured in the same run.

use anyhow::Result;
use engram_model::cpu_matmul::{ProductScope, QuantizedProduct};
use engram_model::{GenerationConfig, Sampling, Session};
use engram_tokenizer::Message;

use crate::Out;
use crate::figures::{Figures, Measured, Peer};

/// What `engram bench generate` measures on a loaded model.
pub struct GenerateBench {
    /// The backend the model is on (for the table's title).
    pub backend: String,
    /// The weight dtype it was loaded in (for the table's title).
    pub dtype: String,
    /// Batch sizes to measure.
    pub batch: Vec<usize>,
    /// New tokens per row (no early stop).
    pub new_tokens: usize,
    /// Timed repetitions (the best is kept).
    pub repeats: usize,
    /// Python for the peers (`none` to skip them).
    pub peer_python: String,
    /// Peers measured on the same file in the same run.
    pub peers: Vec<Peer>,
    /// Threads for the peers.
    pub threads: usize,
    /// Prompt tokens per row: a long user turn of real sentences of at least this many tokens
    /// ending in the row's question (0: the question alone).
    pub prompt_len: usize,
    /// How quantized weights are multiplied on the CPU, each measured in turn.
    pub modes: Vec<QuantizedProduct>,
}

const QUESTIONS: [&str; 16] = [
    "What is the capital of France?",
    "Who wrote the novel Pride and Prejudice?",
    "Explain in one sentence what a pipeline is.",
    "What time is the budget meeting on Tuesday?",
    "Name three colors.",
    "How many days are in a leap year?",
    "What does an energy trader do?",
    "Translate 'good morning' into Spanish.",
    "What is 12 times 12?",
    "Why is the sky blue?",
    "Give me a synonym for happy.",
    "Where is Houston located?",
    "What is a derivative contract?",
    "Summarize the plot of Hamlet in one sentence.",
    "Which planet is closest to the sun?",
    "What is the boiling point of water in Celsius?",
];

/// Row `row`'s chat prompt: its question, after a long user turn of the other questions (taken
/// in turn, numbered) until the prompt holds at least `min_tokens` tokens.
fn prompt(
    tok: &engram_tokenizer::ChatTokenizer,
    row: usize,
    min_tokens: usize,
) -> Result<Vec<u32>> {
    let question = QUESTIONS[row % QUESTIONS.len()];
    let encode = |text: &str| tok.encode_chat_prompt(&[Message::user(text)]);
    let mut ids = encode(question)?;
    if ids.len() >= min_tokens {
        return Ok(ids);
    }
    // Grow the preamble by whole rounds of the questions until long enough, then drop
    // sentences from its end while the prompt stays long enough (a handful of encodes).
    let sentence = |k: usize| {
        format!(
            "{}. {}\n",
            k + 1,
            QUESTIONS[(row + 1 + k) % QUESTIONS.len()]
        )
    };
    let with = |n: usize| {
        let mut text = String::from("Notes from the meeting, for reference:\n");
        for k in 0..n {
            text.push_str(&sentence(k));
        }
        text.push_str("\nAnswer this question: ");
        text.push_str(question);
        encode(&text)
    };
    let mut n = QUESTIONS.len();
    loop {
        ids = with(n)?;
        if ids.len() >= min_tokens {
            break;
        }
        n *= 2;
    }
    let (mut lo, mut hi) = (0, n);
    while lo + 1 < hi {
        let mid = (lo + hi) / 2;
        if with(mid)?.len() >= min_tokens {
            hi = mid;
        } else {
            lo = mid;
        }
    }
    with(hi).map_err(Into::into)
}

/// Measures greedy generation with `loaded` at each batch size, in each product mode, beside
/// the peers on the same file; hands the table to `out`.
pub fn generate(loaded: &Session, args: &GenerateBench, out: Out) -> Result<()> {
    let tok = &loaded.tokenizer;
    let mut batches = Vec::new();
    for &b in &args.batch {
        let prompts: Vec<Vec<u32>> = (0..b)
            .map(|i| prompt(tok, i, args.prompt_len))
            .collect::<Result<_>>()?;
        batches.push(prompts);
    }
    // Per --matmul mode, per batch: the best figures and the greedy tokens.
    let mut runs: Vec<(QuantizedProduct, Vec<Measured>)> = Vec::new();
    let mut modes = args.modes.clone();
    modes.dedup();
    for &mode in &modes {
        let mut ours = Vec::new();
        for prompts in &batches {
            ours.push(measure(&loaded.model, prompts, args, mode)?);
        }
        runs.push((mode, ours));
    }
    let mut peers = args.peers.clone();
    peers.dedup();
    let peers: Vec<(Peer, Result<Vec<Measured>>)> = peers
        .into_iter()
        .map(|p| {
            let figs = crate::peer::generate(
                p,
                &args.peer_python,
                &loaded.origin,
                &batches,
                args.new_tokens,
                args.threads,
                args.repeats,
            );
            (p, figs)
        })
        .collect();
    let llama = peers
        .iter()
        .find(|(p, _)| *p == Peer::LlamaCpp)
        .and_then(|(_, f)| f.as_ref().ok());
    let drift = match llama {
        Some(l) => logprob_drift(&loaded.model, &batches, l, &modes)?,
        None => None,
    };
    say!(
        out,
        "engram bench generate: {} on {} ({} dtype), {} new tokens, greedy, best of {}",
        loaded.origin,
        args.backend,
        args.dtype,
        args.new_tokens,
        args.repeats
    );
    say!(out, "{}", crate::machine_line());
    if !loaded.model.has_quantized_blocks() {
        say!(
            out,
            "(no GGUF blocks kept for this model on this device: --matmul changes nothing)"
        );
    }
    say!(
        out,
        "{:>5}  {:<13} {:>14} {:>14}  {:>8} {:>8}  {:>7}  {:>9}",
        "batch",
        "engine",
        "prefill tok/s",
        "decode tok/s",
        "prefill×",
        "decode×",
        "= exact",
        "= llama.cpp"
    );
    let exact = runs.iter().find(|(m, _)| *m == QuantizedProduct::Exact);
    // Rows whose answers agree: greedy tokens compared up to the first end-of-turn or eos token
    // either side produced (the peers are asked to run on past it, and llama.cpp's
    // `ignore_eos` and transformers' `min_new_tokens` forbid it, so a peer's token there is its
    // second choice), `-` without a reference.
    let stops = tok.stop_ids(&loaded.model.config.eos_token_ids);
    let same_answer = |a: &[u32], b: &[u32]| {
        let end = |row: &[u32]| {
            row.iter()
                .position(|t| stops.contains(t))
                .unwrap_or(row.len())
        };
        let n = end(a).min(end(b));
        a[..n] == b[..n]
    };
    let agree = |tokens: &[Vec<u32>], reference: Option<&[Vec<u32>]>| match reference {
        Some(r) if !r.is_empty() => format!(
            "{}/{}",
            tokens
                .iter()
                .zip(r)
                .filter(|(a, b)| same_answer(a, b))
                .count(),
            tokens.len()
        ),
        _ => "-".into(),
    };
    for (i, &b) in args.batch.iter().enumerate() {
        let exact_tokens = exact.map(|(_, e)| &e[i].tokens[..]);
        let llama_tokens = llama.and_then(|l| l.get(i)).map(|m| &m.tokens[..]);
        for (mode, ours) in &runs {
            let Measured {
                figures: f, tokens, ..
            } = &ours[i];
            let name = format!("engram {}", mode.name());
            say!(
                out,
                "{b:>5}  {name:<13} {:>14.1} {:>14.1}  {:>8} {:>8}  {:>7}  {:>9}",
                f.prefill_tps(),
                f.decode_tps(),
                "",
                "",
                agree(tokens, exact_tokens),
                agree(tokens, llama_tokens)
            );
        }
        let ours = &runs[0].1[i].figures;
        for (peer, figs) in &peers {
            if let Some(Measured {
                figures: p, tokens, ..
            }) = figs.as_ref().ok().and_then(|f| f.get(i))
            {
                say!(
                    out,
                    "{b:>5}  {:<13} {:>14.1} {:>14.1}  {:>7.2}x {:>7.2}x  {:>7}  {:>9}",
                    peer.name(),
                    p.prefill_tps(),
                    p.decode_tps(),
                    ours.prefill_tps() / p.prefill_tps(),
                    ours.decode_tps() / p.decode_tps(),
                    agree(tokens, exact_tokens),
                    match peer {
                        Peer::LlamaCpp => "-".into(),
                        _ => agree(tokens, llama_tokens),
                    }
                );
            }
        }
    }
    say!(
        out,
        "(= exact, = llama.cpp: rows whose {} greedy tokens, up to the first end-of-turn token either \
         side produced, equal engram exact's, llama.cpp's)",
        args.new_tokens
    );
    if let Some(line) = drift {
        say!(out, "{line}");
    }
    say!(
        out,
        "(× = engram {} / the peer; the peers ran with {} threads, engram with rayon's {})",
        runs[0].0.name(),
        args.threads,
        rayon::current_num_threads()
    );
    for (peer, figs) in &peers {
        if let Err(e) = figs {
            say!(
                out,
                "{} not measured: {}",
                peer.name(),
                engram_io::error_text(e.as_ref())
            );
        }
    }
    Ok(())
}

/// How far the engines' log-probabilities of the same tokens lie apart: llama.cpp's greedy
/// tokens of the largest batch it gave log-probabilities for, each scored by engram after the
/// same prompt and tokens ([`engram_model::forced_logprobs`], batch 1) in every `--matmul`
/// mode; |llama.cpp − engram exact| and |engram mode − engram exact|, largest and mean. The
/// bound a quantized mode is held to is what llama.cpp's own Q8 activations move.
fn logprob_drift(
    model: &engram_model::Llama,
    batches: &[Vec<Vec<u32>>],
    llama: &[Measured],
    modes: &[QuantizedProduct],
) -> Result<Option<String>> {
    let Some((i, l)) = llama.iter().enumerate().rev().find(|(i, l)| {
        l.logprobs.len() == batches[*i].len()
            && l.tokens.len() == l.logprobs.len()
            && l.tokens
                .iter()
                .zip(&l.logprobs)
                .all(|(t, p)| t.len() == p.len())
    }) else {
        return Ok(None);
    };
    let score = |mode: QuantizedProduct| -> Result<Vec<Vec<f64>>> {
        let _products = ProductScope::set(mode);
        let rows = batches[i]
            .iter()
            .zip(&l.tokens)
            .map(|(p, t)| engram_model::forced_logprobs(model, p, t))
            .collect::<std::result::Result<Vec<_>, _>>();
        Ok(rows?)
    };
    let exact = score(QuantizedProduct::Exact)?;
    let gap = |a: &[Vec<f64>]| {
        let d: Vec<f64> = a
            .iter()
            .flatten()
            .zip(exact.iter().flatten())
            .map(|(x, y)| (x - y).abs())
            .collect();
        let max = d.iter().fold(0.0f64, |m, &v| m.max(v));
        (max, d.iter().sum::<f64>() / d.len().max(1) as f64, d.len())
    };
    let theirs: Vec<Vec<f64>> = l
        .logprobs
        .iter()
        .map(|r| r.iter().map(|&p| p as f64).collect())
        .collect();
    let (max, mean, n) = gap(&theirs);
    let mut line = format!(
        "log-probabilities of llama.cpp's {n} greedy tokens ({} prompts), each scored by engram \
         after the same tokens: |llama.cpp - engram exact| max {max:.3}, mean {mean:.4}",
        batches[i].len()
    );
    for &mode in modes.iter().filter(|m| **m != QuantizedProduct::Exact) {
        let (max, mean, _) = gap(&score(mode)?);
        line.push_str(&format!(
            "; |engram {} - engram exact| max {max:.3}, mean {mean:.4}",
            mode.name()
        ));
    }
    Ok(Some(line))
}

/// The best of `repeats` timed runs of `prompts` with `mode`'s products (after a short
/// warm-up), with the greedy tokens of the last.
fn measure(
    model: &engram_model::Llama,
    prompts: &[Vec<u32>],
    args: &GenerateBench,
    mode: QuantizedProduct,
) -> Result<Measured> {
    let cfg = GenerationConfig {
        max_new_tokens: args.new_tokens,
        sampling: Sampling::Greedy,
        stop_ids: vec![],
        matmul: mode,
    };
    let _ = engram_model::generate(
        model,
        &prompts[..1],
        &GenerationConfig {
            max_new_tokens: 2,
            ..cfg.clone()
        },
    )?;
    let mut best: Option<Figures> = None;
    let mut tokens = Vec::new();
    for _ in 0..args.repeats.max(1) {
        let g = engram_model::generate(model, prompts, &cfg)?;
        let f = Figures {
            prefill_tokens: g.prefill_tokens,
            prefill_secs: g.prefill_secs,
            decode_tokens: g.decode_tokens,
            decode_secs: g.decode_secs,
        };
        tokens = g.tokens;
        best = Some(match best {
            Some(b) => Figures {
                prefill_secs: b.prefill_secs.min(f.prefill_secs),
                decode_secs: b.decode_secs.min(f.decode_secs),
                ..f
            },
            None => f,
        });
    }
    Ok(Measured {
        figures: best.expect("at least one repeat"),
        tokens,
        logprobs: Vec::new(),
    })
}
