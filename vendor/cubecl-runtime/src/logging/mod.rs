mod observer;
pub use observer::*;

mod profiling;
pub use profiling::*;

mod server;

pub use server::*;
