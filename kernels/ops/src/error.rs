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
