use crate::compute::device_poison::PoisonWatch;
use crate::{
    CompilerInfo, ParamsTransfer, WgpuResource,
    stream::WgpuStream,
    timings::{TimestampQuerySetBudget, TimestampSampling},
};
use alloc::sync::Arc;
use cubecl_common::{bytes::Bytes, pool::LeaseHandle, profile::TimingMethod};
use cubecl_core::server::{BufferBinding, DeviceCaptures, ServerError};
use cubecl_core::{CubeCount, MemoryConfiguration, server::MetadataBindingInfo, zspace::SmallVec};
use cubecl_ir::MemoryDeviceProperties;
use cubecl_server::{
    logging::ServerLogger,
    memory_management::{ErrorGraph, SharedMemoryBindings},
    stream::{StreamFactory, scheduler::SchedulerStreamBackend},
};

/// Defines tasks that can be scheduled on a WGPU stream.
pub enum ScheduleTask {
    /// Represents a task to write data to a buffer.
    Write {
        /// The data to be written.
        data: Bytes,
        /// The target buffer resource.
        buffer: WgpuResource,
        /// The buffer the write fills, which a rejection has to taint: a
        /// destination nothing copied into is one a later read must fail on
        /// rather than copy stale bytes out of.
        handle: BufferBinding,
    },
    /// Represents a task to execute a compute pipeline.
    Execute {
        /// The compute pipeline to execute.
        pipeline: Arc<wgpu::ComputePipeline>,
        /// The number of workgroups to dispatch.
        count: CubeCount,
        /// The resources (bindings) required for execution.
        resources: BindingsResource,
        /// Cross-stream input memory bindings that must be kept alive until this
        /// task's submission completes on the GPU.
        ///
        /// [`WgpuStream::flush`] ties its release to the consuming submission's completion.
        /// Pooled buffer returned to the [`LeasePool`](cubecl_common::pool::LeasePool)
        /// when this task is drained and the handle drops.
        shared_inputs: LeaseHandle<SharedMemoryBindings>,
    },
}

impl core::fmt::Debug for ScheduleTask {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Write { data, .. } => f.write_fmt(format_args!("Write(bytes={})", data.len())),
            Self::Execute {
                count, resources, ..
            } => f.write_fmt(format_args!(
                "Execute(resources={}, cube_count={count:?})",
                resources.resources.len()
            )),
        }
    }
}

/// Represents a collection of resources and bindings for a compute task.
#[derive(Debug)]
pub struct BindingsResource {
    /// List of WGPU resources used in the task.
    pub resources: Vec<WgpuResource>,
    /// Metadata for uniform bindings.
    pub info: MetadataBindingInfo,
    /// Which compiler was used. This determines the passing strategy of params.
    /// WGSL and metal use bindings, Vulkan uses buffer addresses sent via a uniform buffer.
    pub compiler_info: CompilerInfo,
}

/// Represents a WGPU backend for scheduling tasks on streams.
#[derive(Debug)]
pub struct ScheduledWgpuBackend {
    /// Factory for creating WGPU streams.
    factory: WgpuStreamFactory,
}

/// Factory for creating WGPU streams with specific configurations.
#[derive(Debug)]
pub struct WgpuStreamFactory {
    device: wgpu::Device,
    queue: wgpu::Queue,
    memory_properties: MemoryDeviceProperties,
    memory_config: MemoryConfiguration,
    timing_method: TimingMethod,
    /// Per-device budget of live timestamp query sets, shared by every stream it creates.
    timing_budget: Arc<TimestampQuerySetBudget>,
    timestamp_sampling: TimestampSampling,
    tasks_max: usize,
    logger: Arc<ServerLogger>,
    count: u64,
    use_vulkan_compiler: bool,
    /// The device's captures, which every stream this creates takes its capture state from.
    captures: DeviceCaptures,
    /// Whether the device is poisoned, shared by every stream the factory creates.
    poison: PoisonWatch,
}

impl StreamFactory for WgpuStreamFactory {
    type Stream = WgpuStream;

    fn create(&mut self) -> Result<Self::Stream, ServerError> {
        self.count += 1;

        let gpu_config = self.memory_config.clone();
        Ok(WgpuStream::new(
            self.device.clone(),
            self.queue.clone(),
            self.memory_properties.clone(),
            gpu_config,
            self.timing_method,
            self.timing_budget.clone(),
            self.timestamp_sampling,
            self.tasks_max,
            self.logger.clone(),
            self.use_vulkan_compiler,
            &self.captures,
            self.poison.clone(),
        ))
    }
}

impl ScheduledWgpuBackend {
    /// Creates a new `ScheduledWgpuBackend` with the given WGPU device, queue, and configurations.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        device: wgpu::Device,
        queue: wgpu::Queue,
        memory_properties: MemoryDeviceProperties,
        memory_config: MemoryConfiguration,
        timing_method: TimingMethod,
        backend: wgpu::Backend,
        tasks_max: usize,
        logger: Arc<ServerLogger>,
        use_vulkan_compiler: bool,
        captures: DeviceCaptures,
    ) -> Self {
        // One budget per device. Only Metal caps counter sample buffers; others go unbounded.
        let timing_budget = Arc::new(match backend {
            wgpu::Backend::Metal => TimestampQuerySetBudget::metal(),
            _ => TimestampQuerySetBudget::unbounded(),
        });

        let poison = PoisonWatch::watch(&device);

        Self {
            factory: WgpuStreamFactory {
                device,
                queue,
                memory_properties,
                memory_config,
                timing_method,
                timing_budget,
                timestamp_sampling: TimestampSampling::new(backend),
                tasks_max,
                logger,
                count: 0,
                use_vulkan_compiler,
                captures,
                poison,
            },
        }
    }
}

pub type Addresses = SmallVec<[u64; 8]>;

impl BindingsResource {
    /// Converts metadata and scalar bindings into WGPU resources for a stream.
    pub fn into_resources(
        mut self,
        stream: &mut WgpuStream,
    ) -> (Vec<WgpuResource>, Vec<WgpuResource>, Option<Addresses>) {
        let info = (!self.info.data.is_empty())
            .then(|| stream.info_uniform(core::mem::take(&mut self.info.data)));
        match self.compiler_info {
            CompilerInfo::Vulkan { params_transfer } => {
                let addresses = self
                    .resources
                    .iter()
                    .chain(info.iter())
                    .map(|it| it.address.unwrap().get() + it.offset)
                    .collect::<Addresses>();
                if let Some(info) = info {
                    self.resources.push(info);
                }
                match params_transfer {
                    ParamsTransfer::Immediate => (vec![], self.resources, Some(addresses)),
                    ParamsTransfer::Uniform => {
                        let address_buffer =
                            stream.create_uniform(bytemuck::cast_slice(&addresses));
                        (vec![address_buffer], self.resources, None)
                    }
                }
            }
            _ => {
                if let Some(info) = info {
                    self.resources.push(info);
                }
                (self.resources, vec![], None)
            }
        }
    }
}

impl SchedulerStreamBackend for ScheduledWgpuBackend {
    type Task = ScheduleTask;
    type Stream = WgpuStream;
    type Factory = WgpuStreamFactory;

    fn enqueue(task: Self::Task, stream: &mut Self::Stream, failures: &mut ErrorGraph) {
        stream.enqueue_task(task, failures);
    }

    fn flush(stream: &mut Self::Stream, _failures: &mut ErrorGraph) {
        stream.submit();
    }

    fn factory(&mut self) -> &mut Self::Factory {
        &mut self.factory
    }

    fn requires_isolation(stream: &Self::Stream) -> bool {
        // For the whole prepare → record window: warmup must prime this
        // stream's own pools, and the recording must contain exactly this
        // stream's tasks — interleaved execution would do either on an
        // arbitrary stream.
        stream.capturing.is_active()
    }
}
