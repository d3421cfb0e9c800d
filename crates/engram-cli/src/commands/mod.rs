//! One module per subcommand.

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
pub mod selftest;
pub mod sweep;
pub mod table;
pub mod train;
