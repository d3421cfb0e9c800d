//! Whether f32 matmuls may run on TF32 tensor cores (engram patch).
//!
//! Upstream registers TF32 on every device of compute capability 8.0 or newer, and cubek-matmul
//! then promotes the operands of every accelerated f32 matmul to TF32 (10 mantissa bits). With
//! TF32 turned off before the first device opens, the device does not advertise the type, so
//! accelerated f32 matmuls are not candidates and f32 matmuls keep f32 (as PyTorch's
//! `torch.backends.cuda.matmul.allow_tf32 = False`). Read when a device opens: it applies to
//! devices opened afterwards.

use std::sync::atomic::{AtomicBool, Ordering};

static ALLOWED: AtomicBool = AtomicBool::new(true);

/// Allows or forbids TF32 for f32 matmuls on devices opened from now on (allowed by default).
pub fn set_tf32_allowed(allowed: bool) {
    ALLOWED.store(allowed, Ordering::Relaxed);
}

/// Whether devices opened now advertise TF32 (where their compute capability has it).
pub fn tf32_allowed() -> bool {
    ALLOWED.load(Ordering::Relaxed)
}
