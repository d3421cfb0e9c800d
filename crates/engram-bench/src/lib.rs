//! engram's benchmarks and device selftest, as a library the command line calls.
//!
//! Every benchmark prints figures beside a peer's measured in the same run where one exists:
//! [`train()`] (LoRA training beside PEFT, on a checkpoint), [`random_train`] and
//! [`random_generate`] (any architecture with random weights drawn on the device: training steps
//! with their phases, greedy generation), [`matmul()`] (each matrix product of a training step,
//! timed on the device beside torch's), [`generate()`] (greedy generation beside transformers
//! and llama.cpp), [`long_context()`] (the shared-prefix KV cache), [`batches()`] (the trainer's
//! batch layouts), [`corpus()`] (ingest and MinHash), [`rag_bench()`] (retrievers over a corpus,
//! and a reader over what they retrieved); [`selftest()`] checks a device against transformers'
//! references and the CPU backend.
//!
//! Nothing here prints: each bench hands its lines, as it produces them, to the caller's
//! `out` (the binary prints them), and returns its figures.

/// Where a bench's lines go, one at a time as they are produced (the binary prints them).
pub type Out<'a> = &'a mut dyn FnMut(&str);

/// Formats a line and hands it to `out`.
macro_rules! say {
    ($out:expr) => {
        ($out)("")
    };
    ($out:expr, $($arg:tt)*) => {
        ($out)(&format!($($arg)*))
    };
}

mod batches;
mod captured;
mod child;
mod corpus;
mod figures;
mod generate;
mod long_context;
mod machine;
mod matmul;
mod peer;
mod phases;
mod rag_bench;
mod random;
mod selftest;
mod train;

pub use batches::{BatchesBench, batches};
pub use child::{own_peak_rss_mb, run_measured};
pub use corpus::{CorpusBench, corpus};
pub use figures::{Figures, Measured, Peer};
pub use generate::{GenerateBench, generate};
pub use long_context::{LongContextBench, long_context};
pub use machine::machine_line;
pub use matmul::{Group, MatmulBench, Problem, SplitK, StepShape, matmul, step_problems};
pub use phases::{Phase, step_phases};
pub use rag_bench::{RagBench, RagOutcome, ReaderBench, Which, check_reader_k, rag_bench};
pub use random::{
    RandomGenerate, RandomTrain, known_peak_tflops, random_generate, random_train, train_step_flops,
};
pub use selftest::{Selftest, selftest};
pub use train::{PeftPeer, TrainBench, train};
