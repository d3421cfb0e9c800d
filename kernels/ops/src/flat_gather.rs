//! One kernel that lays many f32 matrices end to end in a flat bucket: the gradient gather of
//! engram-lora's `flat` on the CubeCL backends (wgpu, CUDA).
//!
//! Burn has no multi-tensor copy: its `cat` is one slice-assign per input, so gathering a step's
//! adapter gradients cost one launch per factor (448 on Llama-3.1-8B) plus a zero fill. This
//! kernel takes up to [`MAX_INPUTS`] matrices per launch (fewer where the device binds fewer
//! storage buffers) and writes a contiguous range of the bucket, gaps included (as zeros), so a
//! bucket costs `⌈factors / MAX_INPUTS⌉` launches and no fill. It reads each input through its
//! strides, so a transposed gradient needs no copy first.
//!
//! The op is registered with Burn's fusion stream as one opaque operation
//! (`crate::cube_op::register`), so it runs in stream order after the kernels that
//! produce the gradients.

use burn::tensor::{DType, Shape, Tensor as BurnTensor};
use burn_cubecl::tensor::CubeTensor;
use cubecl::prelude::*;

use crate::cube_op::{plain_f32, plain_tensor};

/// The most inputs one launch reads (its code is unrolled over them).
pub const MAX_INPUTS: usize = 16;

/// `value`, or `input`'s element at `pos` where `pos` falls in its range `start..end`, `input`
/// laid out as `[.., cols]` with strides `(row_stride, col_stride)`. The range and layout come from the host as
/// scalars, and a launch whose inputs are all contiguous (`strided` false, the usual case)
/// reads each at its offset in the range with no integer division in its code: with each unit
/// reading the inputs' metadata and a division and remainder compiled in, the gather of a
/// rank-16,384 tiny model's 33.5 M gradient values took 2.00 s on llvmpipe, 16 times an AdamW
/// update over the same values; with the layout from the host, 0.72 s; without the division,
/// 0.26 s. A launch with a strided input (a transposed gradient) pays the division and
/// remainder for its row and column.
#[allow(clippy::too_many_arguments)]
#[cube]
fn pick(
    input: &Tensor<f32>,
    start: usize,
    end: usize,
    cols: usize,
    row_stride: usize,
    col_stride: usize,
    pos: usize,
    value: f32,
    #[comptime] strided: bool,
) -> f32 {
    let mut out = value;
    if pos >= start && pos < end {
        let local = pos - start;
        if comptime![strided] {
            out = input[(local / cols) * row_stride + (local % cols) * col_stride];
        } else {
            out = input[local];
        }
    }
    out
}

/// Writes `output[base + pos]` for `pos < len`: the element of the input whose range holds
/// `pos`, or zero. CubeCL sequences cannot hold tensors, so the inputs are [`MAX_INPUTS`]
/// parameters; the unused ones are bound to the first input with an empty range at `len`, so
/// their range holds no `pos` and they are never read. How many are used is not a compile-time
/// constant (a kernel per count compiled up to 16 variants, about 0.3 s each on an H200): two
/// kernels serve every launch, one for launches whose inputs are all row-major and one
/// (`strided`) for the others.
#[allow(clippy::too_many_arguments)]
#[cube(launch_unchecked)]
fn flat_gather_kernel(
    i0: &Tensor<f32>,
    i1: &Tensor<f32>,
    i2: &Tensor<f32>,
    i3: &Tensor<f32>,
    i4: &Tensor<f32>,
    i5: &Tensor<f32>,
    i6: &Tensor<f32>,
    i7: &Tensor<f32>,
    i8: &Tensor<f32>,
    i9: &Tensor<f32>,
    i10: &Tensor<f32>,
    i11: &Tensor<f32>,
    i12: &Tensor<f32>,
    i13: &Tensor<f32>,
    i14: &Tensor<f32>,
    i15: &Tensor<f32>,
    starts: Sequence<usize>,
    ends: Sequence<usize>,
    cols: Sequence<usize>,
    row_strides: Sequence<usize>,
    col_strides: Sequence<usize>,
    output: &mut Tensor<f32>,
    base: usize,
    len: usize,
    #[comptime] strided: bool,
) {
    let pos = ABSOLUTE_POS;
    if pos >= len {
        terminate!();
    }
    let mut value = pick(
        i0,
        starts[0],
        ends[0],
        cols[0],
        row_strides[0],
        col_strides[0],
        pos,
        0.0f32,
        strided,
    );
    value = pick(
        i1,
        starts[1],
        ends[1],
        cols[1],
        row_strides[1],
        col_strides[1],
        pos,
        value,
        strided,
    );
    value = pick(
        i2,
        starts[2],
        ends[2],
        cols[2],
        row_strides[2],
        col_strides[2],
        pos,
        value,
        strided,
    );
    value = pick(
        i3,
        starts[3],
        ends[3],
        cols[3],
        row_strides[3],
        col_strides[3],
        pos,
        value,
        strided,
    );
    value = pick(
        i4,
        starts[4],
        ends[4],
        cols[4],
        row_strides[4],
        col_strides[4],
        pos,
        value,
        strided,
    );
    value = pick(
        i5,
        starts[5],
        ends[5],
        cols[5],
        row_strides[5],
        col_strides[5],
        pos,
        value,
        strided,
    );
    value = pick(
        i6,
        starts[6],
        ends[6],
        cols[6],
        row_strides[6],
        col_strides[6],
        pos,
        value,
        strided,
    );
    value = pick(
        i7,
        starts[7],
        ends[7],
        cols[7],
        row_strides[7],
        col_strides[7],
        pos,
        value,
        strided,
    );
    value = pick(
        i8,
        starts[8],
        ends[8],
        cols[8],
        row_strides[8],
        col_strides[8],
        pos,
        value,
        strided,
    );
    value = pick(
        i9,
        starts[9],
        ends[9],
        cols[9],
        row_strides[9],
        col_strides[9],
        pos,
        value,
        strided,
    );
    value = pick(
        i10,
        starts[10],
        ends[10],
        cols[10],
        row_strides[10],
        col_strides[10],
        pos,
        value,
        strided,
    );
    value = pick(
        i11,
        starts[11],
        ends[11],
        cols[11],
        row_strides[11],
        col_strides[11],
        pos,
        value,
        strided,
    );
    value = pick(
        i12,
        starts[12],
        ends[12],
        cols[12],
        row_strides[12],
        col_strides[12],
        pos,
        value,
        strided,
    );
    value = pick(
        i13,
        starts[13],
        ends[13],
        cols[13],
        row_strides[13],
        col_strides[13],
        pos,
        value,
        strided,
    );
    value = pick(
        i14,
        starts[14],
        ends[14],
        cols[14],
        row_strides[14],
        col_strides[14],
        pos,
        value,
        strided,
    );
    value = pick(
        i15,
        starts[15],
        ends[15],
        cols[15],
        row_strides[15],
        col_strides[15],
        pos,
        value,
        strided,
    );
    output[base + pos] = value;
}

/// Inputs one launch takes on `client`'s device: [`MAX_INPUTS`], or fewer where the device
/// binds fewer storage buffers (one is the output, one is left for the runtime's metadata).
fn inputs_per_launch(client: &cubecl::client::Client) -> usize {
    let bindings = client.properties().hardware.max_bindings as usize;
    bindings.saturating_sub(2).clamp(1, MAX_INPUTS)
}

/// Whether the matrix `t` lies row-major from its offset: element `(r, c)` at `r · cols + c`.
fn row_major(t: &CubeTensor) -> bool {
    let (shape, strides) = (t.meta.shape(), t.meta.strides());
    (shape[1] == 1 || strides[1] == 1) && (shape[0] == 1 || strides[0] == shape[1])
}

/// `[len]` f32 tensor holding `inputs[i]` (each `[rows, cols]` f32, any strides) row-major from
/// element `starts[i]`, zeros elsewhere. `starts` must be increasing and the ranges disjoint.
fn gather_cube(inputs: Vec<CubeTensor>, starts: &[usize], len: usize) -> CubeTensor {
    let first = &inputs[0];
    let (client, device) = (first.client.clone(), first.device.clone());
    let output = burn_cubecl::ops::numeric::empty_device_contiguous_dtype(
        client.clone(),
        device,
        Shape::from([len]),
        DType::F32,
    );
    let per_launch = inputs_per_launch(&client);
    let groups = inputs.len().div_ceil(per_launch);
    let mut chunks = inputs.into_iter().zip(starts.iter().copied()).peekable();
    for g in 0..groups {
        let base = if g == 0 {
            0
        } else {
            chunks.peek().expect("group").1
        };
        let mut group: Vec<CubeTensor> = Vec::with_capacity(MAX_INPUTS);
        let mut seqs: [SequenceArg<usize>; 5] = std::array::from_fn(|_| SequenceArg::new());
        for _ in 0..per_launch {
            let Some((t, start)) = chunks.next() else {
                break;
            };
            let (shape, strides) = (t.meta.shape(), t.meta.strides());
            let values = [
                start - base,
                start - base + shape.num_elements(),
                shape[1],
                strides[0],
                strides[1],
            ];
            for (seq, v) in seqs.iter_mut().zip(values) {
                seq.push(v);
            }
            group.push(t);
        }
        let end = chunks.peek().map_or(len, |(_, s)| *s);
        let units = end - base;
        for _ in group.len()..MAX_INPUTS {
            group.push(group[0].clone());
            // An empty range at the launch's end: never read.
            for (seq, v) in seqs.iter_mut().zip([units, units, 1, 1, 1]) {
                seq.push(v);
            }
        }
        let [offs, ends, cols, row_strides, col_strides] = seqs;
        let strided = group.iter().any(|t| !row_major(t));
        let mut args = group.into_iter().map(CubeTensor::into_tensor_arg);
        let mut arg = || args.next().expect("MAX_INPUTS arguments");
        let (cube_count, cube_dim) = crate::cube_op::fixed_launch(&client, units);
        // SAFETY: every read is within its input's shape (the range check above) and every write
        // within `output` (`base + pos < end ≤ len`).
        unsafe {
            flat_gather_kernel::launch_unchecked(
                &client,
                cube_count,
                cube_dim,
                arg(),
                arg(),
                arg(),
                arg(),
                arg(),
                arg(),
                arg(),
                arg(),
                arg(),
                arg(),
                arg(),
                arg(),
                arg(),
                arg(),
                arg(),
                arg(),
                offs,
                ends,
                cols,
                row_strides,
                col_strides,
                output.clone().into_tensor_arg(),
                base,
                units,
                strided,
            );
        }
    }
    output
}

/// `[len]` f32 tensor holding `inputs[i]` (2-D f32) row-major from element `starts[i]`, zeros
/// elsewhere, in one launch per [`MAX_INPUTS`] inputs — or `None` (inputs handed back) where the
/// tensors are not plain CubeCL tensors (the CPU backend, or tensors tracked by autodiff).
pub fn gather(
    inputs: Vec<BurnTensor<2>>,
    starts: &[usize],
    len: usize,
) -> Result<BurnTensor<1>, Vec<BurnTensor<2>>> {
    assert_eq!(inputs.len(), starts.len(), "one start per input");
    let fused: Option<Vec<_>> = inputs.iter().map(plain_f32).collect();
    let Some(fused) = fused.filter(|f| !f.is_empty()) else {
        return Err(inputs);
    };
    // Handed to the op alone, as the gradients' last users (fusion may then free them after it).
    drop(inputs);
    let starts = starts.to_vec();
    let out = crate::cube_op::register(
        "engram_flat_gather",
        fused,
        Shape::from([len]),
        DType::F32,
        move |inputs| gather_cube(inputs, &starts, len),
    );
    Ok(plain_tensor(out))
}

#[cfg(all(test, feature = "wgpu"))]
mod tests {
    use crate::LaunchCounter;
    use crate::testing::f32_values;
    use burn::tensor::{DType, Tensor, TensorData};

    use super::{MAX_INPUTS, gather};

    /// 37 matrices of several shapes (one a transposed view, so read through its strides) laid
    /// out with gaps: the bucket holds each row-major from its start and zeros elsewhere, in
    /// one launch per `MAX_INPUTS` inputs on llvmpipe (which binds plenty of buffers). The first
    /// launch, which holds the transposed view, runs the strided kernel; the others the
    /// contiguous one.
    #[test]
    fn lays_matrices_end_to_end_with_zero_gaps_in_few_launches() {
        let device = crate::open_device("wgpu").expect("a wgpu adapter (CI installs llvmpipe)");
        let inner = device.clone();
        let (mut inputs, mut starts, mut want) = (Vec::new(), Vec::new(), Vec::new());
        let mut at = 3; // a gap before the first, too
        for i in 0..37usize {
            let shape = [1 + i % 4, 2 + (i * 7) % 5];
            let n = shape[0] * shape[1];
            let values: Vec<f32> = (0..n).map(|k| (i * 100 + k) as f32 + 0.5).collect();
            let t = if i == 5 {
                // Stored [cols, rows], read as its transpose.
                let stored: Vec<f32> = (0..n)
                    .map(|k| values[(k % shape[0]) * shape[1] + k / shape[0]])
                    .collect();
                Tensor::<2>::from_data(
                    TensorData::new(stored, [shape[1], shape[0]]),
                    (&inner, DType::F32),
                )
                .transpose()
            } else {
                Tensor::<2>::from_data(TensorData::new(values.clone(), shape), (&inner, DType::F32))
            };
            want.resize(at, 0.0);
            want.extend_from_slice(&values);
            inputs.push(t);
            starts.push(at);
            at += n + i % 3;
        }
        want.resize(at + 5, 0.0);
        let _ = device.sync();
        // One launch observer at a time (CubeCL's is process-wide): counting tests take turns.
        let _g = crate::testing::train_lock();
        let counter = LaunchCounter::start(&device).unwrap();
        let flat = gather(inputs, &starts, want.len()).unwrap_or_else(|_| panic!("not gathered"));
        let got = f32_values(flat);
        // Counted by name: other tests of this binary may launch kernels on the device meanwhile.
        let launched = counter.launched_named("FlatGather");
        assert_eq!(got, want);
        assert_eq!(launched, 37usize.div_ceil(MAX_INPUTS) as u64, "launches");
    }

    /// Tensors the kernel cannot take come back untouched, for the per-slot fallback.
    #[test]
    fn hands_back_what_it_cannot_gather() {
        let t = Tensor::<2>::ones([2, 2], (&burn::tensor::Device::flex(), DType::F32));
        assert!(gather(vec![t], &[0], 4).is_err());
    }
}
