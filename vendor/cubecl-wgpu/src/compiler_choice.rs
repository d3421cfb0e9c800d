//! Choosing WGSL over SPIR-V on a Vulkan adapter at run time (engram patch).
//!
//! Upstream, a build with the `spirv` feature compiles every kernel for a Vulkan adapter to
//! SPIR-V whenever the driver has the features CubeCL needs, and nothing can ask for WGSL
//! instead short of another build. `CUBECL_WGPU_COMPILER=wgsl` does, per process: the adapter is
//! then opened and served exactly as a build without `spirv` serves it (a plain wgpu device,
//! WGSL that the driver compiles), except that the device's memory capacity, read from Vulkan,
//! stays known.

/// The variable that picks the compiler for Vulkan adapters: `wgsl`, or `spirv` (the default).
pub const COMPILER_VAR: &str = "CUBECL_WGPU_COMPILER";

/// Whether this process may compile to SPIR-V for a Vulkan adapter: `false` when
/// [`COMPILER_VAR`] is `wgsl` (any case, surrounding blanks ignored), `true` otherwise. Read once,
/// so every device of a process is served by the same compiler.
pub fn spirv_allowed() -> bool {
    static ALLOWED: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ALLOWED.get_or_init(|| {
        !std::env::var(COMPILER_VAR)
            .is_ok_and(|value| value.trim().eq_ignore_ascii_case("wgsl"))
    })
}
