//! One module per subcommand.

pub mod bench;
pub mod fetch;
pub mod generate;
