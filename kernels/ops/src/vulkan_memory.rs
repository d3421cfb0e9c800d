//! The memory of a wgpu device, read from Vulkan's memory heaps, for the planner's "not enough
//! memory" check before a model is loaded.
//!
//! wgpu reports no memory size, and CubeCL reports one (the largest device-local heap) only in
//! its SPIR-V build (engram's `vulkan` feature, on by default). This reads the same figure in every build
//! through the Vulkan loader (`ash`, already in the build under wgpu's Vulkan backend): each
//! physical device's name and its largest heap flagged device-local — the largest, not the
//! first, as CubeCL reasons: a driver may list the host-visible BAR window (256 MB) ahead of a
//! card's real memory; on an integrated adapter the heap is the share of system memory the
//! driver hands the device. A software adapter (Vulkan's CPU type: Mesa's llvmpipe) allocates
//! from the host's memory whatever heap it lists — Mesa 22.3's lists a fixed 2 GiB, and a random
//! 0.8 B-parameter f32 model held 4.2 GB on it — so for one the machine's memory is taken
//! instead. Which physical device wgpu opened is told by the name the opened adapter gives itself
//! (wgpu takes it from Vulkan's `deviceName`); where two devices of that name report different
//! sizes, the memory cannot be told and the check passes.

use ash::vk;

/// One Vulkan physical device, as the planner reads it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VulkanDevice {
    /// The name it gives itself (`NVIDIA H200`, `llvmpipe (LLVM 15.0.6, 256 bits)`).
    pub name: String,
    /// Its largest device-local memory heap, in bytes (0 where it lists none).
    pub local_heap: u64,
    /// Whether it is a software adapter (Vulkan's CPU device type), which allocates from the
    /// host's memory.
    pub software: bool,
}

/// Every physical device the Vulkan loader lists; `Err` says why none could be read (no
/// loader, no instance, no device list).
pub fn vulkan_devices() -> Result<Vec<VulkanDevice>, String> {
    // SAFETY: loading the Vulkan loader library runs its initialisers, as wgpu's does.
    let entry = unsafe { ash::Entry::load() }
        .map_err(|e| format!("the Vulkan loader (libvulkan.so.1) did not load: {e}"))?;
    let app = vk::ApplicationInfo::default().api_version(vk::make_api_version(0, 1, 0, 0));
    let info = vk::InstanceCreateInfo::default().application_info(&app);
    // SAFETY: `info` and `app` outlive the call; the instance is destroyed below.
    let instance = unsafe { entry.create_instance(&info, None) }
        .map_err(|e| format!("no Vulkan instance: {e}"))?;
    // SAFETY: `instance` is valid until it is destroyed, after every query on it.
    let listed = unsafe { instance.enumerate_physical_devices() }
        .map_err(|e| format!("Vulkan lists no devices: {e}"));
    let devices = listed.map(|physical| {
        physical
            .into_iter()
            .map(|device| {
                // SAFETY: `device` comes from this instance's list.
                let props = unsafe { instance.get_physical_device_properties(device) };
                let memory = unsafe { instance.get_physical_device_memory_properties(device) };
                let name = props
                    .device_name_as_c_str()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_default();
                VulkanDevice {
                    name,
                    local_heap: largest_local_heap(&memory),
                    software: props.device_type == vk::PhysicalDeviceType::CPU,
                }
            })
            .collect()
    });
    // SAFETY: nothing created from the instance is alive.
    unsafe { instance.destroy_instance(None) };
    devices
}

/// The largest heap flagged device-local (0 where none is).
fn largest_local_heap(memory: &vk::PhysicalDeviceMemoryProperties) -> u64 {
    let count = (memory.memory_heap_count as usize).min(memory.memory_heaps.len());
    memory.memory_heaps[..count]
        .iter()
        .filter(|heap| heap.flags.contains(vk::MemoryHeapFlags::DEVICE_LOCAL))
        .map(|heap| heap.size)
        .max()
        .unwrap_or(0)
}

/// The memory of the device named `name` among `devices`: its largest device-local heap (for a
/// software adapter, `host`: the machine's memory), where every device of that name has the same
/// non-zero figure; `None` where none has that name or their figures differ (which of them wgpu
/// opened cannot be told).
pub fn memory_of(devices: &[VulkanDevice], name: &str, host: Option<u64>) -> Option<u64> {
    let mut sizes = devices
        .iter()
        .filter(|d| d.name == name)
        .map(|d| if d.software { host } else { Some(d.local_heap) });
    let first = sizes.next().flatten().filter(|&s| s > 0)?;
    sizes.all(|s| s == Some(first)).then_some(first)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn device(name: &str, local_heap: u64) -> VulkanDevice {
        VulkanDevice {
            name: name.into(),
            local_heap,
            software: false,
        }
    }

    #[test]
    fn the_named_device_gives_its_memory_unless_it_cannot_be_told() {
        let gib = 1 << 30;
        let devices = [
            device("NVIDIA H200", 141 * gib),
            VulkanDevice {
                software: true,
                ..device("llvmpipe (LLVM 15.0.6, 256 bits)", 2 * gib)
            },
            device("AMD Radeon", 16 * gib),
            device("AMD Radeon", 16 * gib),
            device("Intel Arc", 8 * gib),
            device("Intel Arc", 16 * gib),
            device("No heap", 0),
        ];
        let host = Some(24 * gib);
        assert_eq!(memory_of(&devices, "NVIDIA H200", host), Some(141 * gib));
        // A software adapter allocates from the host, whatever heap it lists.
        let llvmpipe = "llvmpipe (LLVM 15.0.6, 256 bits)";
        assert_eq!(memory_of(&devices, llvmpipe, host), Some(24 * gib));
        assert_eq!(memory_of(&devices, llvmpipe, None), None);
        // Two cards of one name and one size: that size, whichever wgpu opened.
        assert_eq!(memory_of(&devices, "AMD Radeon", host), Some(16 * gib));
        // Two of one name and different sizes: which one wgpu opened cannot be told.
        assert_eq!(memory_of(&devices, "Intel Arc", host), None);
        assert_eq!(memory_of(&devices, "No heap", host), None);
        assert_eq!(memory_of(&devices, "Apple M3", host), None);
    }

    #[test]
    fn the_largest_device_local_heap_is_taken() {
        let mut memory = vk::PhysicalDeviceMemoryProperties {
            memory_heap_count: 3,
            ..Default::default()
        };
        // A 256 MB BAR window listed first, the card's memory, and host memory (not local).
        memory.memory_heaps[0] = vk::MemoryHeap {
            size: 256 << 20,
            flags: vk::MemoryHeapFlags::DEVICE_LOCAL,
        };
        memory.memory_heaps[1] = vk::MemoryHeap {
            size: 80 << 30,
            flags: vk::MemoryHeapFlags::DEVICE_LOCAL,
        };
        memory.memory_heaps[2] = vk::MemoryHeap {
            size: 512 << 30,
            flags: vk::MemoryHeapFlags::empty(),
        };
        // A heap past the count is not read.
        memory.memory_heaps[3] = vk::MemoryHeap {
            size: 1 << 40,
            flags: vk::MemoryHeapFlags::DEVICE_LOCAL,
        };
        assert_eq!(largest_local_heap(&memory), 80 << 30);
        memory.memory_heap_count = 0;
        assert_eq!(largest_local_heap(&memory), 0);
    }
}
