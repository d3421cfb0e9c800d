//! Device tensors kept per (device, length): what a training run rebuilds every step for the
//! same few lengths (RoPE tables, the causal mask) is built once and reused.

use std::sync::Mutex;

use burn::tensor::Device;

/// Values built per (device, length) and kept, at most `capacity` of them (the oldest goes
/// first).
#[derive(Debug)]
pub(crate) struct LengthCache<T> {
    entries: Mutex<Vec<(Device, usize, T)>>,
    capacity: usize,
}

impl<T: Clone> LengthCache<T> {
    /// An empty cache keeping at most `capacity` values.
    pub(crate) const fn new(capacity: usize) -> Self {
        Self {
            entries: Mutex::new(Vec::new()),
            capacity,
        }
    }

    /// The value kept for (`device`, `len`), else `build()`'s, kept.
    pub(crate) fn get_or_build(&self, device: &Device, len: usize, build: impl FnOnce() -> T) -> T {
        let mut entries = self.entries.lock().expect("length cache");
        if let Some((_, _, v)) = entries.iter().find(|(d, n, _)| *n == len && d == device) {
            return v.clone();
        }
        let v = build();
        if entries.len() == self.capacity {
            entries.remove(0);
        }
        entries.push((device.clone(), len, v.clone()));
        v
    }

    /// Values kept.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.entries.lock().expect("length cache").len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_values_per_device_and_length_and_drops_the_oldest() {
        let cache = LengthCache::new(2);
        let cpu = Device::flex();
        let mut builds = 0;
        let mut get = |d: &Device, n: usize| {
            cache.get_or_build(d, n, || {
                builds += 1;
                n * 10 + builds
            })
        };
        assert_eq!(get(&cpu, 1), 11);
        assert_eq!(get(&cpu, 1), 11);
        assert_eq!(get(&cpu, 2), 22);
        // A third length drops the oldest, length 1, which is then built again.
        assert_eq!(get(&cpu, 3), 33);
        assert_eq!(get(&cpu, 2), 22);
        assert_eq!(get(&cpu, 1), 14);
    }
}
