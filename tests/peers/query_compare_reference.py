"""Reference figures from NumPy and SciPy for engram's comparison of generated with real queries
(crates/engram-baselines/src/rag/query_compare.rs): seeded samples of cosine similarities — two
alike, two shifted apart, one with ties, one small — with NumPy's 40-bin histogram over [-1, 1],
SciPy's Jensen–Shannon divergence (base 2; scipy returns the distance, its square root) and
SciPy's two-sample Kolmogorov–Smirnov statistic, and NumPy's mean, standard deviation and median.

    pip install numpy==2.1.3 scipy==1.14.1
    python tests/peers/query_compare_reference.py tests/fixtures/query-compare/scipy.json
"""

import json
import sys

import numpy as np
from scipy.spatial.distance import jensenshannon
from scipy.stats import ks_2samp

BINS = 40


def case(name, a, b):
    a = [float(x) for x in a]
    b = [float(x) for x in b]
    ha, _ = np.histogram(a, bins=BINS, range=(-1.0, 1.0))
    hb, _ = np.histogram(b, bins=BINS, range=(-1.0, 1.0))
    return {
        "name": name,
        "a": a,
        "b": b,
        "hist_a": [int(x) for x in ha],
        "hist_b": [int(x) for x in hb],
        "js_divergence": float(jensenshannon(ha, hb, base=2) ** 2),
        "ks_statistic": float(ks_2samp(a, b).statistic),
        "mean_a": float(np.mean(a)),
        "std_a": float(np.std(a)),
        "median_a": float(np.median(a)),
    }


def main(out):
    rng = np.random.default_rng(29)
    clip = lambda x: np.clip(x, -1.0, 0.999999)
    cases = [
        case("alike", clip(rng.normal(0.55, 0.1, 300)), clip(rng.normal(0.55, 0.1, 200))),
        case("shifted", clip(rng.normal(0.7, 0.08, 250)), clip(rng.normal(0.45, 0.12, 120))),
        case("apart", clip(rng.normal(0.85, 0.03, 80)), clip(rng.normal(0.2, 0.05, 90))),
        case(
            "ties",
            np.round(clip(rng.normal(0.5, 0.2, 150)), 2),
            np.round(clip(rng.normal(0.4, 0.2, 150)), 2),
        ),
        case("small", clip(rng.normal(0.3, 0.3, 7)), clip(rng.normal(0.5, 0.3, 5))),
    ]
    with open(out, "w") as f:
        json.dump({"numpy": np.__version__, "cases": cases}, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main(sys.argv[1])
