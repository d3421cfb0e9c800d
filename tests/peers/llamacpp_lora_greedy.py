#!/usr/bin/env python3
"""llama.cpp's greedy tokens and their log-probabilities on a GGUF model, with a LoRA adapter
GGUF applied (`--lora`) or without: the check that an adapter engram exported is one llama.cpp
loads and applies as engram does. Runs llama.cpp's own server (PyPI `xllamacpp`, which embeds
it; its completion handler is called directly, no HTTP).

    pip install xllamacpp==2026.10.11549
Usage: python llamacpp_lora_greedy.py MODEL.gguf PROMPT_IDS.json N [--lora ADAPTER.gguf]
Prints one JSON line: {"tokens": [...], "logprobs": [...]} (N greedy ids after the prompt).
"""
import argparse
import json
import os
import sys


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("prompt")
    ap.add_argument("n", type=int)
    ap.add_argument("--lora")
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    import xllamacpp as xlc

    ids = json.load(open(args.prompt))
    p = xlc.CommonParams()
    p.model.path = args.model
    p.n_parallel = 1
    p.n_ctx = len(ids) + args.n + 16
    p.cpuparams.n_threads = args.threads
    p.cpuparams_batch.n_threads = args.threads
    p.ui = False
    p.port = 0
    p.hostnames = ["127.0.0.1"]
    if args.lora:
        a = xlc.CommonAdapterLoraInfo()
        a.path = args.lora
        a.scale = 1.0
        p.lora_adapters = [a]
    server = xlc.Server(p)
    out = server.handle_completions({"prompt": ids, "n_predict": args.n, "temperature": 0.0,
                                     "ignore_eos": True, "cache_prompt": False, "logprobs": 1})
    choices = out.get("choices", []) if isinstance(out, dict) else []
    if "error" in out or len(choices) != 1:
        sys.stderr.write(f"llama.cpp answered {json.dumps(out)[:300]}\n")
        sys.stderr.flush()
        os._exit(1)
    content = (choices[0].get("logprobs") or {}).get("content", [])
    print(json.dumps({"tokens": [t["id"] for t in content],
                      "logprobs": [t["logprob"] for t in content]}), flush=True)
    del server
    os._exit(0)


if __name__ == "__main__":
    main()
