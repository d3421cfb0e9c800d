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

/// Reads `t` to the host as f32 values, counting the read.
pub(crate) fn read_f32(t: Tensor<1>) -> Vec<f32> {
    HOST_READS.fetch_add(1, Ordering::Relaxed);
    t.into_data()
        .try_into_vec_as::<f32>()
        .expect("a float tensor reads as f32")
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

/// The first step whose loss was not finite.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct NonFinite(pub StepLoss);

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
    /// the read as an error (the steps before it are lost with the run, which ends there).
    pub fn read(&mut self) -> Result<Vec<StepLoss>, NonFinite> {
        if self.pending.is_empty() {
            return Ok(Vec::new());
        }
        let (metas, tensors): (Vec<StepLoss>, Vec<Tensor<1>>) =
            std::mem::take(&mut self.pending).into_iter().unzip();
        let values = read_f32(end_to_end(tensors));
        let mut out = Vec::with_capacity(metas.len());
        for (mut m, v) in metas.into_iter().zip(values) {
            m.loss = v as f64;
            if !m.loss.is_finite() {
                return Err(NonFinite(m));
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
        let NonFinite(s) = log.read().unwrap_err();
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
}
