//! Compiling autotune's candidates side by side, on threads of their own.
//!
//! CubeCL compiles a kernel inside the launch that first needs it, on the device's thread, so the
//! matmul candidates autotune benchmarks for a new shape compile one after another: most of a
//! cold start's host time (`MatmulEntry` in the compile summary). engram's patched
//! cubecl-runtime (`vendor/cubecl-runtime/ENGRAM-PATCH.md`) first runs every candidate of a key
//! as a compile-only launch; engram's patched cubecl-wgpu and cubecl-cuda compile such launches
//! on a pool of [`THREADS_VAR`] threads — CubeCL's expansion, the compiler (SPIR-V; LLVM or
//! NVRTC to PTX) and the driver's part (the pipeline build; the PTX load) — and the benchmarks
//! that follow wait only for the candidate they run.
//!
//! On for wgpu devices on Vulkan adapters (SPIR-V); wgpu running WGSL compiles on the device's
//! thread as before. On CUDA only when asked ([`CUDA_VAR`]`=on`), until a GPU has shown that it
//! works and pays there.

/// The variable that sets how many threads compile a GPU device's kernels ahead (engram's
/// cubecl-runtime reads it, once per process): a count, or `0` to compile every kernel on the
/// device's thread as upstream CubeCL does. Unset: one less than the host's parallelism, at most
/// 16. Compiling ahead is on from 2 threads ([`MIN_THREADS`]).
#[cfg(any(feature = "wgpu", feature = "cuda"))]
pub use cubecl_runtime::dry_run::pool::THREADS_VAR;

/// The variable that turns compiling ahead on for CUDA devices: `on` (or `1`, `true`, `yes`);
/// off by default, because only a GPU can test it (`scripts/gpu-check.sh` compares a cold
/// selftest each way).
pub const CUDA_VAR: &str = "ENGRAM_CUDA_COMPILE_AHEAD";

/// What a value of [`THREADS_VAR`] asks for: `None` (the default count) when unset or empty,
/// else the count; anything that is not a whole number is named.
#[cfg(any(feature = "wgpu", feature = "cuda"))]
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

/// What a value of [`CUDA_VAR`] asks for: `false` when unset, empty, `off`, `0`, `false` or
/// `no`; `true` for `on`, `1`, `true` or `yes`; any other value is named.
pub fn cuda_setting(value: Option<&str>) -> Result<bool, String> {
    crate::device::switch_setting(CUDA_VAR, value, false)
}

/// The least [`threads`] that compile ahead. With one, the device's thread would wait for it to
/// compile the candidates in turn, which is no faster and compiles candidates autotune might
/// have skipped (so a 2-core host, whose default is 1, compiles as before unless asked).
pub const MIN_THREADS: usize = 2;

/// How many threads compile a GPU device's kernels ahead ([`THREADS_VAR`], else its default).
#[cfg(any(feature = "wgpu", feature = "cuda"))]
pub fn threads() -> usize {
    cubecl_runtime::dry_run::pool::threads()
}

/// Turns autotune's compile-ahead pass on for this process where [`threads`] is at least
/// [`MIN_THREADS`] and the device compiles SPIR-V: called before a wgpu device opens. A bad value
/// was refused before.
#[cfg(feature = "wgpu")]
pub fn turn_on() {
    let on = threads() >= MIN_THREADS && !crate::device::wgpu_wgsl_forced();
    cubecl_runtime::dry_run::set_compile_ahead(on);
}

/// Turns autotune's compile-ahead pass on for this process where `asked` ([`CUDA_VAR`]) and
/// [`threads`] is at least [`MIN_THREADS`]: called before a CUDA device opens.
#[cfg(feature = "cuda")]
pub fn turn_on_cuda(asked: bool) {
    cubecl_runtime::dry_run::set_compile_ahead(asked && threads() >= MIN_THREADS);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg(any(feature = "wgpu", feature = "cuda"))]
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

    /// The patched cubecl-runtime's bookkeeping of compiles handed to its pool, which the wgpu
    /// and CUDA servers share: results arrive by key, once each, and a job that panics is lost
    /// (its launch then compiles the kernel itself).
    #[cfg(any(feature = "wgpu", feature = "cuda"))]
    #[test]
    fn compiles_handed_to_the_pool_arrive_by_key() {
        use cubecl_runtime::dry_run::pool::{Pending, enabled};
        let mut pending: Pending<u32, u32> = Pending::default();
        if !enabled() {
            assert!(!pending.spawn(1, || 10), "no pool: nothing on its way");
            assert_eq!(pending.wait(&1), None);
            return;
        }
        assert!(pending.spawn(1, || 10));
        assert!(pending.spawn(2, || 20));
        assert!(pending.spawn(3, || panic!("a lost compile (expected in this test)")));
        assert!(pending.contains(&2));
        assert_eq!(pending.wait(&1), Some(10));
        assert!(!pending.contains(&1));
        assert_eq!(pending.wait(&1), None, "forgotten once waited for");
        assert_eq!(pending.wait(&3), None, "a job that panicked");
        let mut done = Vec::new();
        while pending.contains(&2) {
            done.extend(pending.finished());
            std::thread::yield_now();
        }
        assert_eq!(done, [(2, 20)]);
        assert!(pending.finished().is_empty());
    }

    #[test]
    fn cuda_compiles_ahead_only_when_asked() {
        for off in [None, Some(""), Some("off"), Some("0"), Some("No")] {
            assert_eq!(cuda_setting(off), Ok(false), "{off:?}");
        }
        for on in ["on", "1", "TRUE", " yes "] {
            assert_eq!(cuda_setting(Some(on)), Ok(true), "{on}");
        }
        let err = cuda_setting(Some("maybe")).unwrap_err();
        assert!(err.contains("ENGRAM_CUDA_COMPILE_AHEAD=maybe"), "{err}");
    }
}
