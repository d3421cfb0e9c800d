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
/// backtrace placeholders and blank lines CubeCL's errors carry, and at most 600 characters.
pub fn device_message(text: &str) -> String {
    let mut parts: Vec<&str> = Vec::new();
    for line in text.lines().map(str::trim) {
        let noise = line.is_empty()
            || line == "Caused by:"
            || line == "Asked at:"
            || line == "stack backtrace:"
            || line.starts_with("No backtrace available")
            || line.starts_with("note: ");
        if !noise && parts.last() != Some(&line) {
            parts.push(line);
        }
    }
    let joined = parts.join(": ");
    match joined.char_indices().nth(600) {
        Some((cut, _)) => format!("{}…", &joined[..cut]),
        None => joined,
    }
}

/// Whether a device error's text says an allocation failed (out of memory, or a buffer larger
/// than the device allocates).
pub fn is_allocation_failure(message: &str) -> bool {
    let m = message.to_ascii_lowercase();
    [
        "can't allocate",
        "out of memory",
        "outofmemory",
        "out_of_memory",
        "allocation failed",
    ]
    .iter()
    .any(|k| m.contains(k))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn device_messages_are_one_line_without_backtrace_placeholders() {
        let text = "An error happened during execution\nCaused by:\n  Several failures at once\nCaused by:\n  An IO error happened\nCaused by:\n  can't allocate buffer of size: 1050673152\nNo backtrace available\nAsked at:\nNo backtrace available\n";
        let m = device_message(text);
        assert_eq!(
            m,
            "An error happened during execution: Several failures at once: An IO error happened: can't allocate buffer of size: 1050673152"
        );
        assert!(is_allocation_failure(&m));
        assert!(!is_allocation_failure("Cube count too big (16, 75000, 1)"));
        assert!(device_message(&"x".repeat(700)).ends_with('…'));
    }
}
