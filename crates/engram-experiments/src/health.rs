//! How a LoRA cell's training went, read from its record's loss per epoch: a run whose loss
//! went non-finite or ended above where it started **diverged**; one whose loss fell and then
//! rose far above its lowest (to more than [`COLLAPSE_RATIO`] × its lowest, and by more than
//! [`COLLAPSE_RISE`] nats) **collapsed**. The table shows such a cell as `diverged` /
//! `collapsed` instead of an accuracy: an answer rate from a broken run is not a finding.
//! A run whose memorization curve (`eval_every`) reached a peak and then fell by at least
//! [`CURVE_DROP`] **collapsed** too. Records without the per-epoch losses (made before they were
//! kept) are taken as fine.

use crate::record::{CellRecord, MethodMetrics};

/// How far the final loss may rise above the lowest, as a ratio, before the run counts as
/// collapsed (together with [`COLLAPSE_RISE`]).
pub const COLLAPSE_RATIO: f64 = 4.0;

/// How far the final loss may rise above the lowest, in nats, before the run counts as
/// collapsed (together with [`COLLAPSE_RATIO`]).
pub const COLLAPSE_RISE: f64 = 0.25;

/// How far a memorization curve may fall below its peak (exact match, 0–1) before the run
/// counts as collapsed: three standard errors of a 32-question sample at 0.5.
pub const CURVE_DROP: f64 = 0.3;

/// A training run's health.
#[derive(Debug, Clone, PartialEq)]
pub enum Health {
    /// Nothing wrong seen (or nothing to look at).
    Fine,
    /// The loss went non-finite, or ended above where it started (why).
    Diverged(String),
    /// The loss fell, then rose far above its lowest (why).
    Collapsed(String),
}

impl Health {
    /// `fine`, `diverged` or `collapsed`.
    pub fn kind(&self) -> &'static str {
        match self {
            Health::Fine => "fine",
            Health::Diverged(_) => "diverged",
            Health::Collapsed(_) => "collapsed",
        }
    }

    /// Why, for people (empty when fine).
    pub fn why(&self) -> &str {
        match self {
            Health::Fine => "",
            Health::Diverged(w) | Health::Collapsed(w) => w,
        }
    }
}

/// The health of a run whose epochs' mean losses were `losses`, in order.
pub fn training_health(losses: &[f64]) -> Health {
    if let Some(at) = losses.iter().position(|l| !l.is_finite()) {
        return Health::Diverged(format!("the loss was {} at epoch {}", losses[at], at + 1));
    }
    let (Some(&first), Some(&last)) = (losses.first(), losses.last()) else {
        return Health::Fine;
    };
    if losses.len() > 1 && last > first {
        return Health::Diverged(format!(
            "the loss ended at {last:.4}, above where it started ({first:.4})"
        ));
    }
    let (at, low) = losses
        .iter()
        .copied()
        .enumerate()
        .min_by(|a, b| a.1.total_cmp(&b.1))
        .expect("non-empty");
    if last > COLLAPSE_RATIO * low && last - low > COLLAPSE_RISE {
        return Health::Collapsed(format!(
            "the loss fell to {low:.4} at epoch {} and ended at {last:.4}",
            at + 1
        ));
    }
    Health::Fine
}

/// The health of a run from its memorization curve, `(epoch, exact match)` in order: collapsed
/// when it ended [`CURVE_DROP`] or more below its peak.
pub fn curve_health(curve: &[(usize, f64)]) -> Health {
    let Some(&(_, last)) = curve.last() else {
        return Health::Fine;
    };
    let &(at, peak) = curve
        .iter()
        .max_by(|a, b| a.1.total_cmp(&b.1))
        .expect("non-empty");
    if peak - last >= CURVE_DROP {
        return Health::Collapsed(format!(
            "exact match on the trained questions reached {peak:.3} at epoch {at} and ended at {last:.3}"
        ));
    }
    Health::Fine
}

/// The health of a cell's training, from its record (fine for cells that train nothing): the
/// loss's verdict first, then the curve's.
pub fn health_of(record: &CellRecord) -> Health {
    match &record.metrics.method {
        Some(MethodMetrics::Lora {
            epoch_losses,
            curve,
            ..
        }) => match training_health(epoch_losses) {
            Health::Fine => curve_health(curve),
            h => h,
        },
        _ => Health::Fine,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn losses_tell_a_healthy_run_from_a_broken_one() {
        assert_eq!(training_health(&[]), Health::Fine);
        assert_eq!(training_health(&[2.0, 1.0, 0.3, 0.05]), Health::Fine);
        // A bump on the way down is not a collapse.
        assert_eq!(training_health(&[2.0, 0.5, 0.6, 0.1]), Health::Fine);
        assert!(matches!(
            training_health(&[2.0, f64::NAN, 1.0]),
            Health::Diverged(w) if w.contains("epoch 2")
        ));
        assert!(matches!(
            training_health(&[2.0, 3.0, 5.1]),
            Health::Diverged(w) if w.contains("5.1")
        ));
        // The smoke's r64 on 40 facts at a higher lr: down to 0.05, back up to 0.77.
        assert!(matches!(
            training_health(&[3.0, 1.2, 0.05, 0.3, 0.77]),
            Health::Collapsed(w) if w.contains("epoch 3") && w.contains("0.77")
        ));
        // Small losses wobbling by less than the rise threshold stay fine.
        assert_eq!(training_health(&[3.0, 0.01, 0.2]), Health::Fine);
    }

    #[test]
    fn a_curve_that_falls_from_its_peak_is_a_collapse() {
        assert_eq!(curve_health(&[]), Health::Fine);
        assert_eq!(curve_health(&[(2, 0.1), (4, 0.6), (6, 0.9)]), Health::Fine);
        // A wobble within the sample's noise is not.
        assert_eq!(curve_health(&[(2, 0.5), (4, 0.8), (6, 0.6)]), Health::Fine);
        assert!(matches!(
            curve_health(&[(2, 0.4), (4, 0.9), (6, 0.5)]),
            Health::Collapsed(w) if w.contains("0.900 at epoch 4") && w.contains("0.500")
        ));
    }
}
