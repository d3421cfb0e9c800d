//! `dst ← src` in `dst`'s own memory: the op that closes a captured step's loop.

use burn::tensor::Tensor;

/// `src`'s values written into `dst`'s memory, returned as a tensor of that memory (`dst`'s
/// shape). `dst` is consumed: whatever read it before this call read the old values (the op
/// runs in stream order after them), and nothing can read it after.
///
/// On the CubeCL backends (wgpu, CUDA) a plain f32 `dst` and `src` of the same number of
/// elements, `dst` contiguous, take one copy kernel into `dst`'s buffer, so that a step that
/// ends by assigning its new state into the old reads and writes the same buffers every time —
/// which a replayed graph needs. Anywhere else (the CPU backend, autodiff tensors, other
/// dtypes) the result is `src` reshaped, a new tensor: the same values, no graph to keep.
///
/// # Panics
/// When the element counts differ.
pub fn assign<const D: usize>(dst: Tensor<D>, src: Tensor<D>) -> Tensor<D> {
    assert_eq!(
        dst.shape().num_elements(),
        src.shape().num_elements(),
        "assign: {:?} into {:?}",
        src.shape(),
        dst.shape()
    );
    #[cfg(any(feature = "wgpu", feature = "cuda"))]
    if let Some(out) = cube::assign(&dst, &src) {
        return out;
    }
    let shape = dst.shape();
    src.reshape(shape)
}

#[cfg(any(feature = "wgpu", feature = "cuda"))]
mod cube {
    use burn::tensor::{DType, Tensor as BurnTensor};
    use cubecl::prelude::*;

    use crate::cube_op::{fixed_launch, plain_f32, plain_tensor};

    /// `dst[pos] = src[pos]` over contiguous buffers.
    #[cube(launch_unchecked)]
    fn assign_kernel(src: &Tensor<f32>, dst: &mut Tensor<f32>, len: usize) {
        let pos = ABSOLUTE_POS;
        if pos >= len {
            terminate!();
        }
        dst[pos] = src[pos];
    }

    /// [`super::assign`] on the CubeCL backends, `None` where it does not apply.
    pub(super) fn assign<const D: usize>(
        dst: &BurnTensor<D>,
        src: &BurnTensor<D>,
    ) -> Option<BurnTensor<D>> {
        let inputs = vec![plain_f32(dst)?, plain_f32(src)?];
        let out =
            crate::cube_op::register("engram_assign", inputs, dst.shape(), DType::F32, |mut t| {
                let src = t.pop().expect("src");
                let dst = t.pop().expect("dst");
                // A matmul's output or a view may not be laid out flat: copy it flat first.
                let src = if src.is_contiguous() {
                    src
                } else {
                    burn_cubecl::kernel::into_contiguous(src)
                };
                assert!(
                    dst.is_contiguous(),
                    "assign: the destination is not contiguous"
                );
                let len = dst.meta.shape().num_elements();
                let client = dst.client.clone();
                let (cube_count, cube_dim) = fixed_launch(&client, len);
                // SAFETY: every unit reads and writes below `len`, the element count of both.
                unsafe {
                    assign_kernel::launch_unchecked(
                        &client,
                        cube_count,
                        cube_dim,
                        src.into_tensor_arg(),
                        dst.clone().into_tensor_arg(),
                        len,
                    );
                }
                dst
            });
        Some(plain_tensor(out))
    }
}

#[cfg(test)]
mod tests {
    use burn::tensor::{DType, Device, Tensor, TensorData};

    use super::assign;
    use crate::testing::f32_values;

    fn tensor(values: &[f32], device: &Device) -> Tensor<1> {
        Tensor::from_data(
            TensorData::new(values.to_vec(), [values.len()]),
            (device, DType::F32),
        )
    }

    /// Off the CubeCL backends the result is the source's values in the destination's shape.
    #[test]
    fn on_the_cpu_the_result_is_the_source() {
        let device = Device::flex();
        let dst = tensor(&[0.0; 6], &device).reshape([2, 3]);
        let src = tensor(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0], &device).reshape([3, 2]);
        let out = assign(dst, src);
        assert_eq!(out.dims(), [2, 3]);
        assert_eq!(f32_values(out), vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
    }

    /// On wgpu the values land in the destination's memory: a step `w ← assign(w, w · 2 + 1)`
    /// captured as a graph and replayed reads what the previous replay wrote, so three replays
    /// after the capture (whose warm-up ran three steps) are steps four to six. Without the
    /// assign every replay would read the capture's input again. A transposed source (a view)
    /// is copied flat first.
    #[cfg(feature = "wgpu")]
    #[test]
    fn on_wgpu_a_replayed_graph_reads_what_the_last_replay_assigned() {
        let device = crate::open_device("wgpu").expect("a wgpu adapter (CI installs llvmpipe)");
        let w = std::rc::Rc::new(std::cell::RefCell::new(tensor(&[1.0, -2.0], &device)));
        let state = w.clone();
        let mut graph = burn::tensor::capture(&device, move || {
            let mut w = state.borrow_mut();
            let next = w.clone().mul_scalar(2.0).add_scalar(1.0);
            *w = assign(w.clone(), next);
            w.clone().sum()
        });
        assert!(graph.is_hardware(), "wgpu records a software graph");
        let step = |x: f32| 2.0 * x + 1.0;
        let (mut a, mut b) = (1.0f32, -2.0f32);
        for _ in 0..3 {
            (a, b) = (step(a), step(b));
        }
        for _ in 0..3 {
            (a, b) = (step(a), step(b));
            // SAFETY: the graph's buffers are `w`'s and its own output, alive and used by this
            // thread only.
            let sum = f32_values(unsafe { graph.replay() }.clone());
            assert_eq!(sum, vec![a + b]);
            assert_eq!(f32_values(w.borrow().clone()), vec![a, b]);
        }
        let dst = tensor(&[0.0; 6], &device).reshape([2, 3]);
        let src = tensor(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0], &device)
            .reshape([3, 2])
            .transpose();
        assert_eq!(
            f32_values(assign(dst, src)),
            vec![1.0, 3.0, 5.0, 2.0, 4.0, 6.0]
        );
    }
}
