"""Reference retrieval metrics from pytrec_eval (trec_eval's measures) for engram's Recall@k,
NDCG@k and MRR: seeded random rankings of 150 documents for 60 questions, one relevant document
each, placed at rank 1, near the top, deep, or not retrieved at all.

    pip install pytrec-eval-terrier==0.5.11
    python tests/peers/rag_metrics_reference.py tests/fixtures/rag-metrics/pytrec_eval.json
"""

import json
import random
import sys

import pytrec_eval

KS = [1, 5, 10, 100]


def main(out):
    rng = random.Random(13)
    n_docs, n_queries, depth = 150, 60, 100
    rankings, relevant = [], []
    for q in range(n_queries):
        order = list(range(n_docs))
        rng.shuffle(order)
        ranking = order[:depth]
        kind = q % 4
        if kind == 0:
            rel = ranking[0]
        elif kind == 1:
            rel = ranking[rng.randrange(1, 10)]
        elif kind == 2:
            rel = ranking[rng.randrange(10, depth)]
        else:
            rel = order[rng.randrange(depth, n_docs)]  # not retrieved
        rankings.append(ranking)
        relevant.append(rel)
    qrels = {f"q{q}": {f"d{relevant[q]}": 1} for q in range(n_queries)}
    run = {
        f"q{q}": {f"d{d}": float(depth - r) for r, d in enumerate(rankings[q])}
        for q in range(n_queries)
    }
    measures = {f"recall_{k}" for k in KS} | {f"ndcg_cut_{k}" for k in KS} | {"recip_rank"}
    per_query = pytrec_eval.RelevanceEvaluator(qrels, measures).evaluate(run)
    assert len(per_query) == n_queries

    def mean(m):
        return sum(v[m] for v in per_query.values()) / n_queries

    metrics = {
        "recall": {str(k): mean(f"recall_{k}") for k in KS},
        "ndcg": {str(k): mean(f"ndcg_cut_{k}") for k in KS},
        "mrr": mean("recip_rank"),
    }
    fixture = {
        "source": "pytrec_eval " + getattr(pytrec_eval, "__version__", "(pytrec-eval-terrier 0.5.11)"),
        "rankings": rankings,
        "relevant": relevant,
        "metrics": metrics,
    }
    with open(out, "w") as f:
        json.dump(fixture, f)
        f.write("\n")
    print(json.dumps(metrics, indent=1))


if __name__ == "__main__":
    main(sys.argv[1])
