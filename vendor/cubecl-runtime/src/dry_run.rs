//! Running a workload for the compilation and tuning it provokes, without
//! running the workload itself.
//!
//! Under a [`DryRun`] every launch is still expanded, compiled, validated and
//! cached, and is then dropped instead of reaching the device. A warm-up pass
//! then pays for compilation and tuning without also paying for the work that
//! provoked them, which is what makes producing a shippable environment
//! affordable.
//!
//! The launches autotune issues are the exception: they *are* the measurement,
//! so [`RealRun`] opts them back into executing.
//!
//! **Buffers are left as they were**, so anything read back during a dry run is
//! meaningless. It only suits a pass driven by the *shapes* it produces, which
//! is what keys the caches, and never one that branches on a computed value.
//!
//! The decision is made here, once, on the thread that issues the launch.
//! Servers receive the verdict as a [`LaunchMode`] argument rather than
//! deriving it: by the time a launch reaches a server thread, the context that
//! produced it is gone.

use cubecl_environment::sync::{AtomicUsize, Ordering};

/// What a server should do with a launch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LaunchMode {
    /// Compile if needed, then run it. The normal case.
    Execute,
    /// Compile if needed, cache the artifact, and drop the launch.
    ///
    /// A server honoring this must still do everything a first launch does
    /// short of dispatching — expand, compile, validate, populate its caches —
    /// or the pass buys nothing.
    Skip,
    /// engram patch: compile ahead of use, and drop the launch. Like [`Skip`](Self::Skip), but
    /// a server that can compile off its own thread may start the compile in the background
    /// and return at once; a later launch of the same kernel waits for it. A server that
    /// cannot treats it as `Skip`. Issued under a [`CompileAhead`] guard (autotune's pass
    /// over a key's candidates before it benchmarks them).
    Prepare,
}

impl LaunchMode {
    /// Whether the launch should be dropped rather than run.
    pub fn is_skipped(self) -> bool {
        matches!(self, LaunchMode::Skip | LaunchMode::Prepare)
    }

    /// Whether the launch only asks for its kernel to be compiled ahead, possibly in the
    /// background (engram patch).
    pub fn is_prepare(self) -> bool {
        matches!(self, LaunchMode::Prepare)
    }
}

/// What to do with a launch issued on this thread, right now.
pub fn launch_mode() -> LaunchMode {
    if compile_ahead::on() {
        return LaunchMode::Prepare;
    }
    if !dry_run() || real_run::depth() > 0 {
        return LaunchMode::Execute;
    }

    LaunchMode::Skip
}

/// How many dry runs are open in this process.
///
/// A depth rather than a flag so overlapping guards compose: a swap-and-restore
/// would let one thread's guard end a dry run another thread is still inside,
/// and leave the process dry-running forever once that one dropped in turn.
static DRY_RUN: AtomicUsize = AtomicUsize::new(0);

/// Whether launches are currently compiled and dropped rather than run.
pub fn dry_run() -> bool {
    DRY_RUN.load(Ordering::Relaxed) > 0
}

/// Makes every launch a dry run for as long as it lives, on every thread and
/// every device.
///
/// Overlapping guards compose, so a pass that opens one while another is still
/// open leaves the mode on until the last of them drops.
///
/// The flag is read on the thread issuing a launch, with relaxed ordering, so a
/// launch another thread had already begun issuing may still execute. What is
/// guaranteed is the launches issued by the thread that opened the guard, and
/// every launch issued after other threads observe it.
///
/// This is the only way in: there is deliberately no configuration file or
/// environment variable for it. A dry run left on by accident turns the rest of
/// the process into launches that quietly do nothing and read back
/// uninitialized memory, so its lifetime belongs to a scope in the code that
/// wants it, not to an ambient default nothing in the process can see.
///
/// ```no_run
/// # fn warm_up() {}
/// let _dry_run = cubecl_runtime::dry_run::DryRun::new();
/// warm_up();
/// ```
#[derive(Debug)]
pub struct DryRun {
    _private: (),
}

impl DryRun {
    /// Opens a dry run until the guard drops.
    #[allow(clippy::new_without_default, reason = "a guard is not a value")]
    pub fn new() -> Self {
        DRY_RUN.fetch_add(1, Ordering::Relaxed);
        Self { _private: () }
    }
}

impl Drop for DryRun {
    fn drop(&mut self) {
        DRY_RUN.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Makes the launches issued on this thread execute for real even inside a
/// [`DryRun`], for as long as it lives.
///
/// Autotune holds one: its launches are the measurement a dry run exists to
/// provoke, not the workload it exists to skip. Held across warm-up and samples
/// alike, since a candidate that was never warmed is a candidate measured on
/// its first, slowest run.
///
/// Thread-local, and the thread that matters is the one issuing the launches,
/// which is not always the one that asked for them: a task handed to
/// [`Client::exclusive`](crate::client::Client::exclusive) runs on
/// the device thread. The guard has to live inside that task, alongside the
/// launches it covers, not around the call that submits it.
///
/// engram patch: it also suspends a [`CompileAhead`] open on this thread until it drops, so that
/// an autotune nested in a candidate being compiled ahead measures real launches.
#[derive(Debug)]
pub struct RealRun {
    ahead: bool,
}

impl RealRun {
    /// Opts this thread back into executing until the guard drops.
    #[allow(clippy::new_without_default, reason = "a guard is not a value")]
    pub fn new() -> Self {
        real_run::enter();
        Self {
            ahead: compile_ahead::set(false),
        }
    }
}

impl Drop for RealRun {
    fn drop(&mut self) {
        real_run::exit();
        compile_ahead::set(self.ahead);
    }
}

/// engram patch: the threads that compile kernels ahead, shared by the servers that can
/// (engram's cubecl-wgpu and cubecl-cuda).
#[cfg(all(feature = "std", not(target_family = "wasm")))]
pub mod pool;

/// engram patch: whether autotune compiles a key's candidates ahead, all at once, before it
/// benchmarks them. Off unless a caller turns it on ([`set_compile_ahead`]): it pays only on a
/// server that compiles [`LaunchMode::Prepare`] launches in the background (engram's patched
/// cubecl-wgpu and cubecl-cuda, on [`pool`]), and costs a compile for every candidate of the first batch, where the
/// schedule may have stopped before some of them.
static COMPILE_AHEAD: cubecl_environment::sync::AtomicBool =
    cubecl_environment::sync::AtomicBool::new(false);

/// Turns autotune's compile-ahead pass on or off for the process (engram patch).
pub fn set_compile_ahead(on: bool) {
    COMPILE_AHEAD.store(on, Ordering::Relaxed);
}

/// Whether autotune's compile-ahead pass is on (engram patch).
pub fn compile_ahead() -> bool {
    COMPILE_AHEAD.load(Ordering::Relaxed)
}

/// Makes the launches issued on this thread [`LaunchMode::Prepare`] for as long as it lives
/// (engram patch): their kernels are compiled, possibly in the background, and the launches
/// dropped. Thread-local like [`RealRun`], and for the same reason it has to live inside a task
/// handed to [`Client::exclusive`](crate::client::Client::exclusive).
///
/// The innermost of this guard and [`RealRun`] decides: each saves the state it found and puts
/// it back when it drops.
#[derive(Debug)]
pub struct CompileAhead {
    previous: bool,
}

impl CompileAhead {
    /// Makes this thread's launches compile-ahead launches until the guard drops.
    #[allow(clippy::new_without_default, reason = "a guard is not a value")]
    pub fn new() -> Self {
        Self {
            previous: compile_ahead::set(true),
        }
    }
}

impl Drop for CompileAhead {
    fn drop(&mut self) {
        compile_ahead::set(self.previous);
    }
}

#[cfg(feature = "std")]
mod compile_ahead {
    use core::cell::Cell;

    std::thread_local! {
        static ON: Cell<bool> = const { Cell::new(false) };
    }

    pub(super) fn on() -> bool {
        ON.with(|on| on.get())
    }

    /// Sets this thread's state and returns the one it replaces.
    pub(super) fn set(value: bool) -> bool {
        ON.with(|on| on.replace(value))
    }
}

#[cfg(not(feature = "std"))]
mod compile_ahead {
    pub(super) fn on() -> bool {
        false
    }
    pub(super) fn set(_value: bool) -> bool {
        false
    }
}

#[cfg(feature = "std")]
mod real_run {
    use core::cell::Cell;

    std::thread_local! {
        /// How many [`RealRun`](super::RealRun) guards are open on this thread.
        /// A depth rather than a flag: a tunable may itself dispatch through
        /// another tuner, and the inner one finishing must not un-mark the
        /// outer.
        static DEPTH: Cell<usize> = const { Cell::new(0) };
    }

    pub(super) fn depth() -> usize {
        DEPTH.with(|depth| depth.get())
    }

    pub(super) fn enter() {
        DEPTH.with(|depth| depth.set(depth.get() + 1));
    }

    pub(super) fn exit() {
        DEPTH.with(|depth| depth.set(depth.get().saturating_sub(1)));
    }
}

#[cfg(not(feature = "std"))]
mod real_run {
    // No threads to be local to; this keeps the call sites uniform.
    pub(super) fn depth() -> usize {
        0
    }
    pub(super) fn enter() {}
    pub(super) fn exit() {}
}

#[cfg(test)]
mod tests {
    use super::*;
    // `serial_test`'s macro expands to `vec!`, which a `no_std` crate has to
    // bring in itself.
    use alloc::vec;

    /// The guard nests: an inner measurement ending must not cancel the outer
    /// one, or a tunable that dispatches through another tuner would have the
    /// rest of its own measurement dropped.
    #[test]
    fn real_run_nests() {
        assert_eq!(real_run::depth(), 0);
        let outer = RealRun::new();
        {
            let _inner = RealRun::new();
            assert_eq!(real_run::depth(), 2);
        }
        assert_eq!(real_run::depth(), 1, "the outer guard is still open");
        drop(outer);
        assert_eq!(real_run::depth(), 0);
    }

    /// Nothing is skipped outside a dry run, whatever the depth.
    #[test]
    #[serial_test::serial]
    fn launches_execute_by_default() {
        assert_eq!(launch_mode(), LaunchMode::Execute);
        let _real_run = RealRun::new();
        assert_eq!(launch_mode(), LaunchMode::Execute);
    }

    /// The whole contract in one place: in a dry run every launch is dropped
    /// *except* the ones a measurement issues, which are the tuning the mode
    /// exists to keep.
    #[test]
    #[serial_test::serial]
    fn a_dry_run_spares_the_measurements() {
        let _dry_run = DryRun::new();

        assert_eq!(launch_mode(), LaunchMode::Skip);
        {
            let _real_run = RealRun::new();
            assert_eq!(launch_mode(), LaunchMode::Execute, "a measurement runs");
        }
        assert_eq!(launch_mode(), LaunchMode::Skip);
    }

    /// engram patch: the innermost of `CompileAhead` and `RealRun` decides, and each puts back
    /// what it found: a measurement nested in a compile-ahead pass runs, and the pass resumes
    /// after it.
    #[test]
    #[serial_test::serial]
    fn compile_ahead_yields_to_a_nested_measurement() {
        assert_eq!(launch_mode(), LaunchMode::Execute);
        {
            let _ahead = CompileAhead::new();
            assert_eq!(launch_mode(), LaunchMode::Prepare);
            assert!(launch_mode().is_skipped() && launch_mode().is_prepare());
            {
                let _real_run = RealRun::new();
                assert_eq!(launch_mode(), LaunchMode::Execute, "a measurement runs");
                let _inner = CompileAhead::new();
                assert_eq!(launch_mode(), LaunchMode::Prepare, "a nested pass prepares");
            }
            assert_eq!(launch_mode(), LaunchMode::Prepare, "the pass resumes");
        }
        assert_eq!(launch_mode(), LaunchMode::Execute);
    }

    /// Overlapping guards compose, so neither an inner guard ending nor an
    /// outer one can leave the process in the wrong mode. This is what a
    /// swap-and-restore got wrong across threads.
    #[test]
    #[serial_test::serial]
    fn dry_runs_nest() {
        assert!(!dry_run());
        {
            let _outer = DryRun::new();
            {
                let _inner = DryRun::new();
                assert!(dry_run());
            }
            assert!(dry_run(), "the outer guard is still in force");
        }
        assert!(!dry_run(), "and the process is back to executing");
    }
}
