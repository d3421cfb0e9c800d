//! One module per subcommand.

pub mod answer;
pub mod bench;
pub mod bench_long_context;
pub mod bench_train;
pub mod fetch;
pub mod generate;
pub mod judge;
pub mod merge;
pub mod sweep;
pub mod table;
pub mod train;
