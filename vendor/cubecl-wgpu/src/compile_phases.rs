//! Where a kernel's compile time goes (engram patch).
//!
//! Upstream records one duration per compiled kernel, from its definition to its pipeline
//! (`CompilationRecording`). engram's counter needs to know which part of that a cold start should
//! cut: CubeCL expanding the kernel to its IR, the backend's compiler (IR to SPIR-V, WGSL, PTX),
//! or the driver loading what it produced (building a pipeline, which compiles the shader to the
//! device's code; JIT-compiling PTX). Each compiled kernel logs one line on the target
//! [`TARGET`] at info level: `<compiler> <expand ns> <compile ns> <driver ns> <kernel type>`.

use core::time::Duration;

/// The `log` target of the lines.
pub const TARGET: &str = "cubecl::compile_phases";

/// Logs one compiled kernel's phases: `[expand, compile, driver]`.
pub(crate) fn log(kernel: &str, compiler: &str, phases: [Duration; 3]) {
    let [expand, compile, driver] = phases.map(|d| d.as_nanos());
    log::info!(target: TARGET, "{compiler} {expand} {compile} {driver} {kernel}");
}
