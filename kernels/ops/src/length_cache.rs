//! Device tensors kept per (device, length): what a training run rebuilds every step for the
//! same few lengths (RoPE tables, the causal mask) is built once and reused.

use std::sync::Mutex;

use burn::tensor::Device;

/// Values built per (device, length) and kept, at most `capacity` of them (the oldest goes
/// first).
#[derive(Debug)]
pub struct LengthCache<T> {
    entries: Mutex<Vec<(Device, usize, T)>>,
    capacity: usize,
}

impl<T: Clone> LengthCache<T> {
    /// An empty cache keeping at most `capacity` values.
    pub const fn new(capacity: usize) -> Self {
        Self {
            entries: Mutex::new(Vec::new()),
            capacity,
        }
    }

    /// The value kept for (`device`, `len`), else `build()`'s, kept. A device and its autodiff
    /// twin keep separate values: `Device`'s `==` compares the devices underneath (an autodiff
    /// CPU device equals the plain one), and a tensor of one mixed into the other's operations
    /// (an inference copy of a model being trained shares its caches) computes garbage.
    pub fn get_or_build(&self, device: &Device, len: usize, build: impl FnOnce() -> T) -> T {
        let mut entries = self.entries.lock().expect("length cache");
        let same = |d: &Device| d == device && d.is_autodiff() == device.is_autodiff();
        if let Some((_, _, v)) = entries.iter().find(|(d, n, _)| *n == len && same(d)) {
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
    pub fn len(&self) -> usize {
        self.entries.lock().expect("length cache").len()
    }

    /// Whether nothing is kept.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
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

    /// An autodiff device's values are not handed to the plain device, nor the other way.
    #[test]
    fn a_device_and_its_autodiff_twin_keep_separate_values() {
        let cache = LengthCache::new(4);
        let (cpu, autodiff) = (Device::flex(), Device::flex().autodiff());
        assert_eq!(cache.get_or_build(&autodiff, 1, || 1), 1);
        assert_eq!(cache.get_or_build(&cpu, 1, || 2), 2);
        assert_eq!(cache.get_or_build(&autodiff, 1, || 3), 1);
        assert_eq!(cache.get_or_build(&cpu, 1, || 4), 2);
        assert_eq!(cache.len(), 2);
    }
}
