#!/usr/bin/env python3
"""transformers' side of `engram bench generate`: prefill and decode tokens/s of greedy
generation on the same GGUF model, the same prompt ids and the same thread count.

Reads a JSON file {"batches": [[ids...], ...] per batch size, "new_tokens": N}; prints one JSON
line per batch: {"batch", "prefill_tokens", "prefill_secs", "decode_tokens", "decode_secs",
"tokens"} (tokens: each row's N greedy tokens, from the last timed run).
Prefill = generate(max_new_tokens=1); decode = generate(N tokens, no early stop) minus prefill.

Usage: python hf_generate_bench.py MODEL.gguf PROMPTS.json [--threads 2] [--repeats 2]
"""
import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import argparse  # noqa: E402
import json  # noqa: E402
import time  # noqa: E402

import torch  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("prompts")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=2)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    from transformers import AutoModelForCausalLM, GenerationConfig
    d, f = os.path.dirname(args.model), os.path.basename(args.model)
    model = AutoModelForCausalLM.from_pretrained(d, gguf_file=f, dtype=torch.float32).eval()
    spec = json.load(open(args.prompts))
    n = spec["new_tokens"]
    for batch in spec["batches"]:
        longest = max(len(p) for p in batch)
        ids = torch.tensor([[0] * (longest - len(p)) + p for p in batch])
        att = torch.tensor([[0] * (longest - len(p)) + [1] * len(p) for p in batch])

        tokens = []

        def run(k):
            gc = GenerationConfig(do_sample=False, max_new_tokens=k, min_new_tokens=k, eos_token_id=None,
                                  pad_token_id=0, bos_token_id=None)
            t0 = time.perf_counter()
            with torch.no_grad():
                out = model.generate(input_ids=ids, attention_mask=att, generation_config=gc)
            secs = time.perf_counter() - t0
            tokens[:] = out[:, longest:].tolist()
            return secs

        run(2)  # warm-up
        pre = min(run(1) for _ in range(args.repeats))
        full = min(run(n) for _ in range(args.repeats))
        print(json.dumps({"batch": len(batch), "prefill_tokens": int(att.sum()), "prefill_secs": pre,
                          "decode_tokens": len(batch) * (n - 1), "decode_secs": max(full - pre, 1e-9),
                          "tokens": tokens}),
              flush=True)


if __name__ == "__main__":
    main()
