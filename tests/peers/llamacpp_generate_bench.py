#!/usr/bin/env python3
"""llama.cpp's side of `engram bench generate`: prefill and decode tokens/s of greedy generation
on the same GGUF file, the same prompt ids and the same thread count, through llama.cpp's own
server (PyPI `xllamacpp`, which embeds it; no HTTP: its completion handler is called directly).

Reads the same JSON file as hf_generate_bench.py ({"batches": [[ids...], ...] per batch size,
"new_tokens": N}) and prints one JSON line per batch in the same form. A batch of B prompts is
one request with B prompts, which the server decodes together in B slots (continuous batching).
Prefill = a request for 1 new token; decode = a request for N tokens (end-of-sequence ignored)
minus prefill, as for transformers. The prompt cache is off, so every run prefills. Each row's N
greedy ids ("tokens") and their log-probabilities ("logprobs", log-softmax of llama.cpp's logits)
come from one more, untimed request (the completion text alone does not give ids).

    pip install xllamacpp==2026.10.11549
Usage: python llamacpp_generate_bench.py MODEL.gguf PROMPTS.json [--threads 2] [--repeats 2]
"""
import argparse
import json
import os
import sys
import time


def fail(message):
    """Ends with `message` as stderr's last line (the server's threads would log after it on a
    normal exit; the caller shows that last line)."""
    sys.stderr.flush()
    sys.stderr.write(message + "\n")
    sys.stderr.flush()
    os._exit(1)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("prompts")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=2)
    args = ap.parse_args()
    import xllamacpp as xlc

    spec = json.load(open(args.prompts))
    n = spec["new_tokens"]
    slots = max(len(b) for b in spec["batches"])
    longest = max(len(p) for b in spec["batches"] for p in b)
    p = xlc.CommonParams()
    p.model.path = args.model
    p.n_parallel = slots
    p.n_ctx = slots * (longest + n + 16)
    p.cpuparams.n_threads = args.threads
    p.cpuparams_batch.n_threads = args.threads
    p.ui = False
    p.port = 0
    p.hostnames = ["127.0.0.1"]
    server = xlc.Server(p)
    for batch in spec["batches"]:

        def run(k, with_tokens=False):
            req = {"prompt": batch if len(batch) > 1 else batch[0], "n_predict": k, "temperature": 0.0,
                   "ignore_eos": True, "cache_prompt": False}
            if with_tokens:
                req["logprobs"] = 1  # the generated ids come with their log-probabilities
            t0 = time.perf_counter()
            out = server.handle_completions(req)
            secs = time.perf_counter() - t0
            # One completion with a choice per prompt; each must have run to its length (the
            # end-of-sequence token is ignored).
            choices = out.get("choices", []) if isinstance(out, dict) else []
            if "error" in out or len(choices) != len(batch):
                fail(f"llama.cpp answered {json.dumps(out)[:300]}")
            if any(c.get("finish_reason") != "length" for c in choices):
                fail(f"llama.cpp stopped before {k} tokens: {json.dumps(choices)[:300]}")
            if with_tokens:
                ordered = sorted(choices, key=lambda c: c.get("index", 0))
                content = [(c.get("logprobs") or {}).get("content", []) for c in ordered]
                return ([[t["id"] for t in row] for row in content],
                        [[t["logprob"] for t in row] for row in content])
            return secs

        run(2)  # warm-up
        pre = min(run(1) for _ in range(args.repeats))
        full = min(run(n) for _ in range(args.repeats))
        tokens, logprobs = run(n, with_tokens=True)  # untimed: greedy ids, their log-probabilities
        print(json.dumps({"batch": len(batch), "prefill_tokens": sum(len(q) for q in batch),
                          "prefill_secs": pre, "decode_tokens": len(batch) * (n - 1),
                          "decode_secs": max(full - pre, 1e-9), "tokens": tokens,
                          "logprobs": logprobs, "engine": f"llama.cpp (xllamacpp {xlc.__version__})"}),
              flush=True)
    del server
    os._exit(0)  # the embedded server's threads need not be joined


if __name__ == "__main__":
    main()
