#!/usr/bin/env python3
"""llama.cpp answering the questions of an `engram answer` file with a LoRA adapter GGUF
(`engram export`) applied, or with none (`-`) on a model the adapter was merged into
(`engram merge --gguf`): the documented check that facts an adapter memorized survive the
export. Runs llama.cpp's own server (PyPI `xllamacpp`; its chat-completion handler is called
directly, no HTTP) with the GGUF's own chat template (jinja), greedy, and writes the same JSONL
with llama.cpp's answers, for `engram judge`.

    pip install xllamacpp==2026.10.11549
Usage: python llamacpp_lora_answers.py MODEL.gguf ADAPTER.gguf|- ANSWERS.jsonl OUT.jsonl
       [--max-tokens 32] [--threads 2]
"""
import argparse
import json
import os
import sys


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("lora")
    ap.add_argument("answers")
    ap.add_argument("out")
    ap.add_argument("--max-tokens", type=int, default=32)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    import xllamacpp as xlc

    rows = [json.loads(line) for line in open(args.answers) if line.strip()]
    p = xlc.CommonParams()
    p.model.path = args.model
    p.n_parallel = 1
    p.n_ctx = 2048
    p.use_jinja = True
    p.cpuparams.n_threads = args.threads
    p.cpuparams_batch.n_threads = args.threads
    p.ui = False
    p.port = 0
    p.hostnames = ["127.0.0.1"]
    if args.lora != "-":
        a = xlc.CommonAdapterLoraInfo()
        a.path = args.lora
        a.scale = 1.0
        p.lora_adapters = [a]
    method = "lora (llama.cpp)" if args.lora != "-" else "merged lora (llama.cpp)"
    server = xlc.Server(p)
    with open(args.out, "w") as out:
        for r in rows:
            resp = server.handle_chat_completions({
                "messages": [{"role": "user", "content": r["question"]}],
                "max_tokens": args.max_tokens, "temperature": 0.0})
            choices = resp.get("choices", []) if isinstance(resp, dict) else []
            if "error" in resp or not choices:
                sys.stderr.write(f"llama.cpp answered {json.dumps(resp)[:300]}\n")
                sys.stderr.flush()
                os._exit(1)
            answer = choices[0]["message"]["content"].strip()
            out.write(json.dumps({**r, "method": method, "answer": answer}) + "\n")
    del server
    os._exit(0)


if __name__ == "__main__":
    main()
