//! Step losses kept on the device and read back in one transfer per logging interval, so that
//! an optimizer step never waits for the device: on a GPU, reading a loss drains the queue
//! (with Burn's fusion it also cuts the fused graph), which at EnronQA's ~500-token steps costs
//! more than the step's matrix work. A non-finite loss is still caught — at the next read — and
//! named by the step that produced it, not the step that read it.

use std::sync::atomic::{AtomicU64, Ordering};

use burn::tensor::Tensor;

/// Device-to-host reads issued by engram's training step and its loss log (a benchmark reads
/// this before and after a run of steps: `engram bench train` prints it per step).
static HOST_READS: AtomicU64 = AtomicU64::new(0);

/// Device-to-host reads issued so far by the training code of this crate.
pub fn host_reads() -> u64 {
    HOST_READS.load(Ordering::Relaxed)
}

/// Reads `t` to the host as f32 values, counting the read; the device's error, in one
/// line ([`engram_model::device_message`]), where it failed running the work that writes `t`.
pub(crate) fn read_f32(t: Tensor<1>) -> Result<Vec<f32>, String> {
    HOST_READS.fetch_add(1, Ordering::Relaxed);
    let data = t
        .try_into_data()
        .map_err(|e| engram_model::device_message(&e.to_string()))?;
    Ok(data
        .try_into_vec_as::<f32>()
        .expect("a float tensor reads as f32"))
}

/// Steps `first..=last` (1-based) as words: `step 3`, `steps 3–7`.
pub fn step_span(first: usize, last: usize) -> String {
    if first == last {
        format!("step {first}")
    } else {
        format!("steps {first}–{last}")
    }
}

/// One optimizer step's loss once read back.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StepLoss {
    /// 0-based global optimizer step.
    pub step: usize,
    /// The learning rate it was taken with.
    pub lr: f64,
    /// Mean loss over its label tokens.
    pub loss: f64,
    /// Its label tokens.
    pub labels: usize,
}

/// Why pending losses could not be read.
#[derive(Debug, Clone, PartialEq)]
pub enum ReadError {
    /// The first step whose loss was not finite.
    NonFinite(StepLoss),
    /// The device failed running the steps whose losses were pending (or reading them back).
    Device {
        /// The first of those steps (0-based, global).
        first_step: usize,
        /// The last of them.
        last_step: usize,
        /// The device's error, one line ([`engram_model::device_message`]).
        message: String,
    },
}

/// Losses of steps taken but not yet read.
#[derive(Default)]
pub struct LossLog {
    pending: Vec<(StepLoss, Tensor<1>)>,
}

impl LossLog {
    /// An empty log.
    pub fn new() -> Self {
        Self::default()
    }

    /// Records step `step`'s loss (a 1-element device tensor), taken at `lr` over `labels`
    /// label tokens. Reads nothing.
    pub fn push(&mut self, step: usize, lr: f64, labels: usize, loss: Tensor<1>) {
        let meta = StepLoss {
            step,
            lr,
            loss: f64::NAN,
            labels,
        };
        self.pending.push((meta, loss.detach()));
    }

    /// Steps recorded and not read yet.
    pub fn pending(&self) -> usize {
        self.pending.len()
    }

    /// Reads every pending loss in one transfer, oldest first; the first non-finite one ends
    /// the read as an error (the steps before it are lost with the run, which ends there), as
    /// does a device that failed running the pending steps (out of memory, a kernel that could
    /// not launch): on the GPU backends such a failure surfaces here, at the first read after it.
    pub fn read(&mut self) -> Result<Vec<StepLoss>, ReadError> {
        if self.pending.is_empty() {
            return Ok(Vec::new());
        }
        let (metas, tensors): (Vec<StepLoss>, Vec<Tensor<1>>) =
            std::mem::take(&mut self.pending).into_iter().unzip();
        let values = read_f32(end_to_end(tensors)).map_err(|message| ReadError::Device {
            first_step: metas[0].step,
            last_step: metas[metas.len() - 1].step,
            message,
        })?;
        let mut out = Vec::with_capacity(metas.len());
        for (mut m, v) in metas.into_iter().zip(values) {
            m.loss = v as f64;
            if !m.loss.is_finite() {
                return Err(ReadError::NonFinite(m));
            }
            out.push(m);
        }
        Ok(out)
    }
}

/// The 1-element `losses` end to end, `[n]`: on the GPU backends one kernel per
/// [`engram_ops::flat_gather::MAX_INPUTS`] losses, where Burn's `cat` launches one slice-assign per
/// loss (at one read per logging interval, about a launch per step); `cat` elsewhere.
fn end_to_end(losses: Vec<Tensor<1>>) -> Tensor<1> {
    #[cfg(any(feature = "wgpu", feature = "cuda"))]
    {
        let n = losses.len();
        let plain = losses
            .iter()
            .map(|t| t.clone().without_autodiff().reshape([1, 1]))
            .collect();
        let starts: Vec<usize> = (0..n).collect();
        if let Ok(t) = engram_ops::flat_gather::gather(plain, &starts, n) {
            return t;
        }
    }
    Tensor::cat(losses, 0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use burn::tensor::{Device, TensorData};

    fn scalar(v: f32) -> Tensor<1> {
        Tensor::from_data(TensorData::new(vec![v], [1]), &Device::flex())
    }

    #[test]
    fn reads_all_pending_losses_in_one_transfer_and_names_the_first_non_finite_step() {
        let mut log = LossLog::new();
        for (i, v) in [2.5f32, 1.25, 0.5].into_iter().enumerate() {
            log.push(i, 1e-3, 10 + i, scalar(v));
        }
        let before = host_reads();
        let read = log.read().unwrap();
        assert_eq!(host_reads() - before, 1);
        assert_eq!(log.pending(), 0);
        let losses: Vec<f64> = read.iter().map(|s| s.loss).collect();
        assert_eq!(losses, vec![2.5, 1.25, 0.5]);
        assert_eq!(read[2].labels, 12);
        assert!(log.read().unwrap().is_empty());

        // The first non-finite loss is named by its own step. (One test, not two: the read
        // counter is process-wide, and tests run in parallel.)
        let mut log = LossLog::new();
        for (i, v) in [1.0f32, f32::INFINITY, f32::NAN].into_iter().enumerate() {
            log.push(7 + i, 0.5 * i as f64, 1, scalar(v));
        }
        let Err(ReadError::NonFinite(s)) = log.read() else {
            panic!("a non-finite loss reads as an error")
        };
        assert_eq!((s.step, s.lr, s.loss), (8, 0.5, f64::INFINITY));
    }

    /// On wgpu, losses of a training device (autodiff) read in order, laid end to end by the
    /// gather kernel (20 losses: two launches of up to 16).
    #[cfg(feature = "wgpu")]
    #[test]
    fn on_wgpu_losses_are_laid_end_to_end_by_the_gather_kernel() {
        // One launch observer at a time (CubeCL's is process-wide): counting tests take turns.
        let _g = engram_testkit::train_lock();
        let device = engram_model::testing::wgpu_training_device();
        let want: Vec<f64> = (0..20).map(|i| i as f64 * 0.5 - 3.0).collect();
        let mut log = LossLog::new();
        for (i, &v) in want.iter().enumerate() {
            let t = Tensor::<1>::from_data(TensorData::new(vec![v as f32], [1]), &device);
            log.push(i, 1e-3, 1, t);
        }
        let counter = engram_model::LaunchCounter::start(&device).unwrap();
        let read = log.read().unwrap();
        let got: Vec<f64> = read.iter().map(|s| s.loss).collect();
        assert_eq!(got, want);
        // Counted by name: other tests of the binary may gather meanwhile.
        assert!(
            counter.launched_named("FlatGather") >= 2,
            "{:?}",
            counter.by_kernel()
        );
    }

    /// On wgpu, a step whose work the device cannot run (here a buffer larger than llvmpipe
    /// allocates) fails the read with the device's message and the steps it covers, instead of a
    /// panic; and the log is empty after it.
    #[cfg(feature = "wgpu")]
    #[test]
    fn on_wgpu_a_device_failure_is_an_error_naming_the_pending_steps() {
        let _g = engram_testkit::train_lock();
        let device = engram_model::testing::wgpu_training_device();
        let mut log = LossLog::new();
        let ok = Tensor::<1>::from_data(TensorData::new(vec![1.5f32], [1]), &device);
        log.push(3, 1e-3, 1, ok);
        // 2^31 f32 elements: 8 GiB in one buffer, more than any wgpu device here allocates.
        let huge = Tensor::<1>::ones([1usize << 31], (&device, burn::tensor::DType::F32));
        log.push(4, 1e-3, 1, huge.sum());
        let Err(ReadError::Device {
            first_step,
            last_step,
            message,
        }) = log.read()
        else {
            panic!("the read should fail")
        };
        assert_eq!((first_step, last_step), (3, 4));
        assert!(
            engram_model::memory_hint(&message, "").contains("larger than this device allocates"),
            "{message}"
        );
        assert!(
            !message.contains('\n') && !message.contains("No backtrace"),
            "{message}"
        );
        assert_eq!(log.pending(), 0);
    }
}
