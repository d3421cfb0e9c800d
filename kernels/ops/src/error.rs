//! Why a device cannot be used.

/// A backend that does not exist in this build or cannot start on this machine.
#[derive(Debug, thiserror::Error)]
pub enum DeviceError {
    /// A backend name that is not compiled in or does not exist.
    #[error("unknown backend `{name}`: {hint}")]
    UnknownBackend {
        /// What was asked for.
        name: String,
        /// What is available.
        hint: String,
    },
    /// A backend that is compiled in but cannot start on this machine.
    #[error("backend `{backend}` cannot start: {reason}")]
    Device {
        /// The backend asked for.
        backend: String,
        /// Why, and what to do.
        reason: String,
    },
}

/// Result alias of the device functions.
pub type Result<T, E = DeviceError> = std::result::Result<T, E>;

/// A device error's text as one line: its chain of causes joined by `: `, without the
/// backtrace placeholders, blank lines and the records of skipped work ("skipped `Kernel`: it
/// needed memory …") that CubeCL's errors carry between the failure and its root cause; over
/// 600 characters, its start and its end (the root cause) around an ellipsis.
pub fn device_message(text: &str) -> String {
    let mut parts: Vec<&str> = Vec::new();
    for line in text.lines().map(str::trim) {
        let noise = line.is_empty()
            || line == "Caused by:"
            || line == "Asked at:"
            || line == "stack backtrace:"
            || line.starts_with("No backtrace available")
            || line.starts_with("note: ")
            || line.starts_with("skipped `")
            || (line.starts_with('(') && line.contains("skip record"));
        if !noise && parts.last() != Some(&line) {
            parts.push(line);
        }
    }
    let joined = parts.join(": ");
    let chars: Vec<char> = joined.chars().collect();
    if chars.len() <= 600 {
        return joined;
    }
    let head: String = chars[..250].iter().collect();
    let tail: String = chars[chars.len() - 340..].iter().collect();
    format!("{head} … {tail}")
}

/// What a device error's text says about memory, as a clause to append to it: a buffer
/// larger than the device allocates at all (CubeCL's "can't allocate buffer of size"; a limit
/// of the device, not of the memory left), or memory run out (followed by `lower`: what the
/// user can make smaller); empty where it says neither.
pub fn memory_hint(message: &str, lower: &str) -> String {
    let m = message.to_ascii_lowercase();
    if m.contains("can't allocate buffer of size") {
        " — one buffer is larger than this device allocates at all (a limit of the device, not \
         of the memory left; software and integrated GPUs allow less): this model's shape needs \
         another device"
            .into()
    } else if [
        "out of device memory",
        "out of memory",
        "outofmemory",
        "out_of_memory",
    ]
    .iter()
    .any(|k| m.contains(k))
    {
        format!(" — it ran out of memory: {lower}")
    } else {
        String::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn device_messages_are_one_line_without_backtrace_placeholders() {
        // As CubeCL 0.11 words a failed allocation seen from a later read.
        let text = "An error happened during execution\nCaused by:\n  Several failures at once\nCaused by:\n  The bytes were never written (failure #10, still claiming 32 buffer(s))\n  skipped `FlatGatherKernel`: it needed memory ManagedMemoryId { value: 1250 }, which carried the failure\n  skipped `ElemwiseFuse`: it needed memory ManagedMemoryId { value: 1221 }, which carried the failure\n  (604 older skip record(s) were dropped; the walk may stop before the root)\nCaused by:\n  An IO error happened\nCaused by:\n  can't allocate buffer of size: 1050673152\nNo backtrace available\nAsked at:\nNo backtrace available\n";
        let m = device_message(text);
        assert_eq!(
            m,
            "An error happened during execution: Several failures at once: The bytes were never written (failure #10, still claiming 32 buffer(s)): An IO error happened: can't allocate buffer of size: 1050673152"
        );
        assert!(memory_hint(&m, "x").contains("larger than this device allocates at all"));
        let oom = "An IO error happened: out of device memory allocating 1024 bytes";
        assert_eq!(
            memory_hint(oom, "lower it"),
            " — it ran out of memory: lower it"
        );
        assert_eq!(memory_hint("Cube count too big (16, 75000, 1)", "x"), "");
        let long = device_message(&format!("{}\nCaused by:\n  the root", "x".repeat(700)));
        assert!(long.starts_with("xxx") && long.contains(" … ") && long.ends_with(": the root"));
        assert!(long.chars().count() < 600, "{long}");
    }
}
