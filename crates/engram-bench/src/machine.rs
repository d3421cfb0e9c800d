//! The line that says what a figure was measured with.

/// What a figure was measured with: the build profile, the CPU model, its SIMD features and
/// the threads, in one line (figures from another build or machine are not comparable).
pub fn machine_line() -> String {
    let profile = if cfg!(debug_assertions) {
        "dev (engram's crates at opt-level 1, dependencies and kernels at 3)"
    } else {
        "release"
    };
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|t| {
            t.lines().find_map(|l| {
                l.strip_prefix("model name")
                    .map(|r| r.trim_start_matches([' ', '\t', ':']).to_string())
            })
        })
        .unwrap_or_else(|| std::env::consts::ARCH.to_string());
    let mut simd = Vec::new();
    #[cfg(target_arch = "x86_64")]
    {
        for (name, on) in [
            ("avx2", std::arch::is_x86_feature_detected!("avx2")),
            ("fma", std::arch::is_x86_feature_detected!("fma")),
            ("f16c", std::arch::is_x86_feature_detected!("f16c")),
            ("avx512f", std::arch::is_x86_feature_detected!("avx512f")),
            (
                "avx512vnni",
                std::arch::is_x86_feature_detected!("avx512vnni"),
            ),
        ] {
            if on {
                simd.push(name);
            }
        }
    }
    format!(
        "build {profile}; CPU {cpu} ({} threads; SIMD: {})",
        std::thread::available_parallelism().map_or(1, |n| n.get()),
        if simd.is_empty() {
            "none".to_string()
        } else {
            simd.join(" ")
        }
    )
}
