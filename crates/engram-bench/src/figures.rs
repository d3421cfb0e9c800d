//! What a generation bench measures, for engram and for the peers beside it
//! ([`crate::peer`]): the engines, each batch's prefill and decode figures, its greedy tokens.

/// The inference engines `bench generate` measures beside engram (`--peer`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Peer {
    /// transformers (PyTorch, f32) reading the same GGUF file (dequantized at load).
    Transformers,
    /// llama.cpp's server (PyPI `xllamacpp`) on the same GGUF file, its own kernels.
    #[value(name = "llama.cpp")]
    LlamaCpp,
}

impl Peer {
    /// The name the table shows.
    pub fn name(self) -> &'static str {
        match self {
            Peer::Transformers => "transformers",
            Peer::LlamaCpp => "llama.cpp",
        }
    }
}

/// Prefill and decode figures of one batch.
#[derive(Debug, Clone, Copy)]
pub struct Figures {
    /// Prompt tokens prefilled.
    pub prefill_tokens: usize,
    /// Seconds of prefill.
    pub prefill_secs: f64,
    /// Tokens decoded.
    pub decode_tokens: usize,
    /// Seconds of decode.
    pub decode_secs: f64,
}

impl Figures {
    /// Prompt tokens per second of prefill.
    pub fn prefill_tps(&self) -> f64 {
        self.prefill_tokens as f64 / self.prefill_secs
    }
    /// Tokens per second of decode.
    pub fn decode_tps(&self) -> f64 {
        self.decode_tokens as f64 / self.decode_secs
    }
}

/// One batch measured: the best figures, each row's greedy tokens and, where the engine gives
/// them (llama.cpp), those tokens' log-probabilities.
#[derive(Debug, Clone)]
pub struct Measured {
    /// Best prefill and decode figures.
    pub figures: Figures,
    /// Each row's greedy tokens.
    pub tokens: Vec<Vec<u32>>,
    /// Each row's tokens' log-probabilities (empty where not given).
    pub logprobs: Vec<Vec<f32>>,
}
