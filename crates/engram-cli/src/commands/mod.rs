//! One module per subcommand.

pub mod bench;
pub mod bench_train;
pub mod fetch;
pub mod generate;
pub mod merge;
pub mod train;
