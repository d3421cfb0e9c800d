//! engram's custom operations on Burn tensors, with the backends they run on.
//!
//! Start here: each operation is a folder holding all its implementations — the forward, the
//! closed-form backward (one autodiff node where Burn would record a dozen), the composed
//! reference it is tested against, and the CubeCL kernel the GPU backends run (`cube.rs`):
//! [`attention`] (scores, mask, softmax and the values' product, RoPE'd q/k inside it),
//! [`rope`], [`swiglu`], [`norm`] (RMSNorm), [`cross_entropy`] (the labels' loss),
//! [`pick_rows`] (the label rows' gather), [`delta`] (an adapter's delta added in PEFT's order);
//! `flat_gather` lays many matrices end to end in one
//! launch. The CPU backend's inference takes one-pass host paths (each op's `cpu` module) and
//! multiplies by GGUF blocks in place ([`cpu_matmul`], over `engram-kernels`' SIMD). Around
//! them: opening a backend by name ([`device`]), CubeCL's persistent kernel cache and compile
//! counting ([`kernel_cache`]), a wgpu device's memory for the planner (`vulkan_memory`), the
//! kernel-launch counter the tests and benches read ([`launches`]), and the registration of
//! hand-written kernels with Burn's fusion stream (`cube_op`).
//!
//! The numerics are transformers' (each op's docs say in which order it computes); the model
//! that uses them is engram-model's.

#[macro_use]
mod seam;

pub mod attention;
mod cast;
pub mod compile_ahead;
pub mod compile_phases;
mod cpu;
pub mod cpu_matmul;
pub mod cross_entropy;
#[cfg(any(feature = "wgpu", feature = "cuda"))]
pub mod cube_op;
pub mod delta;
pub mod device;
mod error;
#[cfg(any(feature = "wgpu", feature = "cuda"))]
pub mod flat_gather;
pub mod graph;
pub mod kernel_cache;
pub mod kernel_times;
pub mod launches;
#[doc(hidden)]
pub mod length_cache;
pub mod mask;
pub mod norm;
pub mod pick_rows;
pub mod rope;
pub mod selfcheck;
#[cfg(feature = "wgpu")]
mod settle;
pub mod swiglu;
#[doc(hidden)]
pub mod testing;
#[cfg(feature = "wgpu")]
pub mod vulkan_memory;

pub use device::{
    TF32_VAR, WGPU_COMPILER_VAR, available_backends, backend_kind, cuda_compiler, cuda_tf32,
    device_from_name, device_label, device_memory, device_name, is_cpu, open_device, wgpu_compiler,
};
pub use error::{DeviceError, device_message, memory_hint};
pub use kernel_times::{KernelTime, KernelTimes, TimedLaunch};
pub use launches::LaunchCounter;
