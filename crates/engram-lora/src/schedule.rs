//! The learning-rate schedule: linear warm-up then linear decay to zero, as transformers'
//! `get_linear_schedule_with_warmup` (step 0 of a warm-up runs at lr 0), or warm-up then constant.

/// Linear warm-up and decay over `total` optimizer steps.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LinearSchedule {
    /// Peak learning rate.
    pub base: f64,
    /// Warm-up steps.
    pub warmup: usize,
    /// All steps.
    pub total: usize,
    /// Decay after warm-up (else constant).
    pub decay: bool,
}

impl LinearSchedule {
    /// The learning rate of 0-based optimizer step `step`.
    pub fn at(&self, step: usize) -> f64 {
        let factor = if step < self.warmup {
            step as f64 / self.warmup.max(1) as f64
        } else if !self.decay {
            1.0
        } else {
            let left = self.total.saturating_sub(step) as f64;
            (left / self.total.saturating_sub(self.warmup).max(1) as f64).max(0.0)
        };
        self.base * factor
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_transformers_linear_schedule() {
        // transformers: lr_lambda(s) = s/w for s < w, else max(0, (T-s)/(T-w)).
        let s = LinearSchedule {
            base: 1e-3,
            warmup: 4,
            total: 20,
            decay: true,
        };
        let want = [0.0, 0.25, 0.5, 0.75, 1.0, 15.0 / 16.0];
        for (i, w) in want.iter().enumerate() {
            assert!((s.at(i) - 1e-3 * w).abs() < 1e-15, "step {i}");
        }
        assert_eq!(s.at(20), 0.0);
        let flat = LinearSchedule {
            base: 1.0,
            warmup: 0,
            total: 10,
            decay: true,
        };
        assert_eq!(flat.at(0), 1.0);
        assert!((flat.at(5) - 0.5).abs() < 1e-12);
        let constant = LinearSchedule { decay: false, ..s };
        assert_eq!(constant.at(2), 0.5e-3);
        assert_eq!(constant.at(15), 1e-3);
    }
}
