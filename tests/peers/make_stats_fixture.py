"""Reference statistics for engram's table (crates/engram-experiments/src/stats.rs): Wilson
score intervals from SciPy, McNemar's exact test from statsmodels, and SciPy's percentile
bootstrap of a mean (its own random draws: engram's must land within Monte-Carlo noise of it).

    pip install scipy==1.17.1 statsmodels==0.15.0 numpy==2.4.6
    python tests/peers/make_stats_fixture.py tests/fixtures/stats/reference.json
"""

import json
import sys

import numpy as np
import scipy
import statsmodels
from scipy.stats import binomtest, bootstrap
from statsmodels.stats.contingency_tables import mcnemar

WILSON = [(0, 10), (1, 10), (5, 10), (10, 10), (13, 20), (7, 40), (26, 40), (0, 1), (1, 1),
          (123, 500), (4999, 20000)]
MCNEMAR = [(0, 0), (0, 1), (0, 5), (2, 9), (7, 7), (10, 3), (30, 45), (120, 80), (0, 25),
           (400, 460)]


def main(out):
    rng = np.random.default_rng(7)
    wilson = []
    for k, n in WILSON:
        ci = binomtest(k, n).proportion_ci(confidence_level=0.95, method="wilson")
        wilson.append({"correct": k, "n": n, "low": ci.low, "high": ci.high})
    tests = []
    for b, c in MCNEMAR:
        r = mcnemar([[0, b], [c, 0]], exact=True)
        tests.append({"only_first": b, "only_second": c, "p_value": float(r.pvalue)})
    boots = []
    for n, p in [(20, 0.65), (40, 0.3), (100, 0.9)]:
        x = (rng.random(n) < p).astype(float)
        r = bootstrap((x,), np.mean, confidence_level=0.95, method="percentile",
                      n_resamples=20000, random_state=rng)
        boots.append({"outcomes": x.tolist(), "low": r.confidence_interval.low,
                      "high": r.confidence_interval.high})
    json.dump({"made_with": {"scipy": scipy.__version__, "statsmodels": statsmodels.__version__,
                             "numpy": np.__version__},
               "wilson_95": wilson, "mcnemar_exact": tests, "bootstrap_percentile_95": boots},
              open(out, "w"), indent=1)


if __name__ == "__main__":
    main(sys.argv[1])
