//! Compiling autotune's candidates side by side, on threads of their own.
//!
//! CubeCL compiles a kernel inside the launch that first needs it, on the device's thread, so the
//! matmul candidates autotune benchmarks for a new shape compile one after another: most of a
//! cold start's host time (`MatmulEntry` in the compile summary). engram's patched
//! cubecl-runtime (`vendor/cubecl-runtime/ENGRAM-PATCH.md`) first runs every candidate of a key
//! as a compile-only launch; engram's patched cubecl-wgpu compiles such launches on a pool of
//! [`THREADS_VAR`] threads — CubeCL's expansion, the SPIR-V compiler and the driver's pipeline
//! build — and the benchmarks that follow wait only for the candidate they run.
//!
//! On for wgpu devices on Vulkan adapters (SPIR-V). CUDA, and wgpu running WGSL, compile on the
//! device's thread as before.

/// The variable that sets how many threads compile a wgpu device's kernels ahead (engram's
/// cubecl-wgpu reads it, once per process): a count, or `0` to compile every kernel on the
/// device's thread as upstream CubeCL does. Unset: one less than the host's parallelism, at most
/// 16. Compiling ahead is on from 2 threads ([`MIN_THREADS`]).
#[cfg(feature = "wgpu")]
pub use cubecl_wgpu::background::THREADS_VAR;

/// What a value of [`THREADS_VAR`] asks for: `None` (the default count) when unset or empty,
/// else the count; anything that is not a whole number is named.
#[cfg(feature = "wgpu")]
pub fn threads_setting(value: Option<&str>) -> Result<Option<usize>, String> {
    match value.map(str::trim) {
        None | Some("") => Ok(None),
        Some(v) => v.parse::<usize>().map(Some).map_err(|_| {
            format!(
                "{THREADS_VAR}={v}: use a number of threads (0 compiles on the device's thread)"
            )
        }),
    }
}

/// The least [`threads`] that compile ahead. With one, the device's thread would wait for it to
/// compile the candidates in turn, which is no faster and compiles candidates autotune might
/// have skipped (so a 2-core host, whose default is 1, compiles as before unless asked).
pub const MIN_THREADS: usize = 2;

/// How many threads compile a wgpu device's kernels ahead ([`THREADS_VAR`], else its default).
#[cfg(feature = "wgpu")]
pub fn threads() -> usize {
    cubecl_wgpu::background::threads()
}

/// Turns autotune's compile-ahead pass on for this process where [`threads`] is at least
/// [`MIN_THREADS`] and the device compiles SPIR-V: called before a wgpu device opens. A bad value
/// was refused before.
#[cfg(feature = "wgpu")]
pub fn turn_on() {
    let on = threads() >= MIN_THREADS && !crate::device::wgpu_wgsl_forced();
    cubecl_runtime::dry_run::set_compile_ahead(on);
}

#[cfg(all(test, feature = "wgpu"))]
mod tests {
    use super::*;

    #[test]
    fn counts_are_read_and_anything_else_is_named() {
        assert_eq!(threads_setting(None), Ok(None));
        assert_eq!(threads_setting(Some(" ")), Ok(None));
        assert_eq!(threads_setting(Some("0")), Ok(Some(0)));
        assert_eq!(threads_setting(Some(" 4 ")), Ok(Some(4)));
        let err = threads_setting(Some("many")).unwrap_err();
        assert!(err.contains("CUBECL_COMPILE_THREADS=many"), "{err}");
        assert!(threads_setting(Some("-1")).is_err());
    }
}
