mod base;
mod guard;
mod handle;
mod policy;

pub use base::*;
pub use guard::*;
pub use handle::*;
pub use policy::*;
