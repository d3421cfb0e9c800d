//! One module per subcommand, where it has more to do than hand its arguments to a library
//! (`engram selftest`, `bench batches` and `bench corpus` take [`engram_bench`]'s own).

pub mod answer;
pub mod bench;
pub mod corpus;
pub mod export;
pub mod fetch;
pub mod generate;
pub mod judge;
pub mod merge;
pub mod qa;
pub mod rag_bench;
pub mod sweep;
pub mod table;
pub mod train;
