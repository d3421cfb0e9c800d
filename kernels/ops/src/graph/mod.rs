//! What a training step needs to be captured once and replayed as a graph (CUDA graphs; wgpu's
//! software graphs, which CubeCL records the same way). A replay re-runs the recorded launches
//! on the buffers they had at capture, with the scalars they had then, and nothing on the host
//! runs. So state a step carries to the next — the adapters' values, AdamW's moments, the step
//! count, the dropout stream's position — must be written back into the buffers it was read
//! from ([`assign`]), and what changes from step to step must be computed on the device from
//! such state: AdamW's bias corrections from a step counter, dropout masks from a counter-keyed
//! random stream ([`bernoulli`]).

mod assign;
mod bernoulli;

pub use assign::assign;
pub use bernoulli::bernoulli;
