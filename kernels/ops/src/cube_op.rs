//! A hand-written CubeCL kernel as one operation of Burn's fusion stream, for the GPU backends'
//! own kernels ([`crate::rope::cube`], engram-lora's `flat_gather`).
//!
//! `#[backend_extension]` generates this registration for single-tensor inputs; this is the
//! same registration by hand, for any number of inputs: the op is opaque to fusion and runs in
//! stream order, after the kernels that produce its inputs.

use burn::tensor::{DType, Shape};
use burn_cubecl::CubeBackend;
use burn_cubecl::tensor::CubeTensor;
use burn_fusion::custom::{
    CustomOpIr, HandleContainer, OperationFn, OperationIr, StreamId, TensorIr,
};
use burn_fusion::{FusionBackend, FusionRuntime, FusionTensor};

/// The fusion runtime of Burn's CubeCL backend (`burn::backend::Cube`'s float tensors are
/// `FusionTensor<CubeRuntime>`).
pub type CubeRuntime = <CubeBackend as FusionBackend>::FusionRuntime;

/// Registers `run` (a kernel over the inputs' CubeCL tensors, untiled, returning one tensor of
/// `shape` and `dtype`) as one fusion operation named `id` over `inputs` (at least one), and
/// returns its output.
pub fn register(
    id: &str,
    inputs: Vec<FusionTensor<CubeRuntime>>,
    shape: Shape,
    dtype: DType,
    run: impl Fn(Vec<CubeTensor>) -> CubeTensor + Send + Sync + 'static,
) -> FusionTensor<CubeRuntime> {
    register_many(id, inputs, vec![(shape, dtype)], move |t| vec![run(t)]).remove(0)
}

/// [`register`] for a kernel with several outputs: `run` returns one tensor for each of
/// `outputs` (`(shape, dtype)`), in order, and so does this.
pub fn register_many(
    id: &str,
    inputs: Vec<FusionTensor<CubeRuntime>>,
    outputs: Vec<(Shape, DType)>,
    run: impl Fn(Vec<CubeTensor>) -> Vec<CubeTensor> + Send + Sync + 'static,
) -> Vec<FusionTensor<CubeRuntime>> {
    let client = inputs
        .first()
        .expect("a custom op needs an input")
        .client
        .clone();
    let irs: Vec<TensorIr> = inputs.into_iter().map(|t| t.into_ir()).collect();
    let outs: Vec<TensorIr> = outputs
        .into_iter()
        .map(|(shape, dtype)| TensorIr::uninit(client.create_empty_handle(), shape, dtype))
        .collect();
    let desc = CustomOpIr {
        id: id.into(),
        inputs: irs.clone(),
        outputs: outs.clone(),
        scalars: Vec::new(),
    };
    let op = OperationFn(
        move |handles: &mut HandleContainer<<CubeRuntime as FusionRuntime>::FusionHandle>| {
            let tensors = irs
                .iter()
                .map(|ir| untiled(handles.get_float_tensor::<CubeBackend>(ir)))
                .collect();
            let results = run(tensors);
            assert_eq!(results.len(), outs.len(), "a kernel returns each output");
            for (out, t) in outs.iter().zip(results) {
                handles.register_float_tensor::<CubeBackend>(&out.id, t);
            }
            Ok(())
        },
    );
    client.register(StreamId::current(), OperationIr::Custom(desc), op)
}

/// `t`'s fusion tensor where `t` is a plain (not autodiff-tracked) f32 tensor of a CubeCL
/// backend, `None` elsewhere.
pub fn plain_f32<const D: usize>(t: &burn::tensor::Tensor<D>) -> Option<FusionTensor<CubeRuntime>> {
    use burn::backend::{
        BackendTensor, DispatchAutodiffContext, DispatchTensorKind, TensorMetadata,
    };
    let d = t.clone().into_dispatch();
    if !matches!(d.autodiff, DispatchAutodiffContext::Disabled) || d.kind.dtype() != DType::F32 {
        return None;
    }
    match d.kind {
        DispatchTensorKind::Cube(BackendTensor::Float(f)) => Some(f),
        _ => None,
    }
}

/// A custom op's output as a plain Burn tensor (not tracked by autodiff).
pub fn plain_tensor<const D: usize>(t: FusionTensor<CubeRuntime>) -> burn::tensor::Tensor<D> {
    use burn::backend::{
        BackendTensor, DispatchAutodiffContext, DispatchTensor, DispatchTensorKind,
    };
    burn::tensor::Tensor::from_dispatch(DispatchTensor {
        kind: DispatchTensorKind::Cube(BackendTensor::Float(t)),
        autodiff: DispatchAutodiffContext::Disabled,
    })
}

/// The work size the fixed cube shape of [`fixed_launch`] is chosen for: the largest shape the
/// device gives an element-wise kernel.
const FIXED_CUBE_UNITS: usize = 1 << 16;

/// The cube count and shape of an element-wise launch over `len` units that uses one cube shape
/// whatever `len`: the shape is compiled into the kernel, so a new length compiles nothing new.
pub fn fixed_launch(
    client: &cubecl::client::Client,
    len: usize,
) -> (cubecl::CubeCount, cubecl::CubeDim) {
    let cube_dim = cubecl::CubeDim::new(client, FIXED_CUBE_UNITS);
    (
        cubecl::calculate_cube_count_elemwise(client, len, cube_dim),
        cube_dim,
    )
}

/// A contiguous tensor of `like`'s shape and dtype on its device: a kernel's output.
pub fn empty_like(like: &CubeTensor) -> CubeTensor {
    empty_like_in(like, like.dtype)
}

/// A contiguous tensor of `like`'s shape in `dtype` on its device.
pub fn empty_like_in(like: &CubeTensor, dtype: DType) -> CubeTensor {
    burn_cubecl::ops::numeric::empty_device_contiguous_dtype(
        like.client.clone(),
        like.device.clone(),
        like.meta.shape().clone(),
        dtype,
    )
}

/// CubeCL's element type for an integer `dtype` (a kernel's index tensor, `#[define]`d at
/// launch), `None` for others.
pub fn index_type(dtype: DType) -> Option<cubecl::ir::ElemType> {
    use cubecl::ir::{ElemType, IntKind, UIntKind};
    Some(match dtype {
        DType::I64 => ElemType::Int(IntKind::I64),
        DType::I32 => ElemType::Int(IntKind::I32),
        DType::U64 => ElemType::UInt(UIntKind::U64),
        DType::U32 => ElemType::UInt(UIntKind::U32),
        _ => return None,
    })
}

/// CubeCL's element type for a float `dtype` a hand-written kernel takes (f32, f16, bf16;
/// `#[define]`d at launch), `None` for others.
pub fn float_type(dtype: DType) -> Option<cubecl::ir::ElemType> {
    use cubecl::ir::{ElemType, FloatKind};
    Some(match dtype {
        DType::F32 => ElemType::Float(FloatKind::F32),
        DType::F16 => ElemType::Float(FloatKind::F16),
        DType::BF16 => ElemType::Float(FloatKind::BF16),
        _ => return None,
    })
}

/// `t` laid out as rows (a matmul may leave its output storage-tiled, which only the matmul
/// reads).
fn untiled(t: CubeTensor) -> CubeTensor {
    if t.meta.is_tiled() {
        burn_cubecl::kernel::untile(t)
    } else {
        t
    }
}
