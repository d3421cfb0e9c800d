#!/usr/bin/env python3
"""torch's side of `engram bench matmul`: the same matrix products, timed with torch on the same
device in the same run.

Reads the problems from engram's JSON (`engram bench matmul --json`, or the file it hands this
script) — the step's products and the joined adapter products that could replace some: for each, `[batch, m, k] x [batch, k, n]` in its dtype, each operand stored as engram
stores it (`lhs_transposed`: stored `[batch, k, m]` and read through `.transpose(1, 2)`, as
autograd reads `x^T`; `rhs_transposed` likewise for `W^T`), then times `torch.matmul` on them:
`--warmup` calls, then `--iters` calls between two CUDA events (on the CPU, `perf_counter`
around them). f32 products run as engram runs them: on TF32 tensor cores where engram's device
uses TF32 (CUDA; `--tf32 auto`), which PEFT's default (`allow_tf32 = False`) does not; each f32
product is timed both ways and `us` is the matched one.

    torch_matmul_bench.py PROBLEMS.json --json OUT.json [--device cuda] [--iters 20] [--warmup 3]
"""
import argparse
import json
import os
import time

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
import torch

DTYPES = {"f32": torch.float32, "bf16": torch.bfloat16, "f16": torch.float16}


def time_call(fn, device, iters, warmup):
    """Microseconds per call of fn: device time between two events on CUDA, host time on CPU."""
    for _ in range(warmup):
        fn()
    if device.type == "cuda":
        torch.cuda.synchronize()
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(iters):
            fn()
        end.record()
        torch.cuda.synchronize()
        return 1e3 * start.elapsed_time(end) / iters
    t = time.perf_counter()
    for _ in range(iters):
        fn()
    return 1e6 * (time.perf_counter() - t) / iters


def operands(p, device):
    """The operands as stored, and the views the product reads."""
    b, m, n, k = p["batch"], p["m"], p["n"], p["k"]
    dtype = DTYPES[p["dtype"]]
    g = torch.Generator(device=device).manual_seed(0)

    def rand(*shape):
        return torch.rand(*shape, generator=g, device=device, dtype=torch.float32).mul_(2).sub_(1).to(dtype)

    lhs = rand(b, k, m).transpose(1, 2) if p["lhs_transposed"] else rand(b, m, k)
    rhs = rand(b, n, k).transpose(1, 2) if p["rhs_transposed"] else rand(b, k, n)
    return lhs, rhs


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("problems")
    ap.add_argument("--json", required=True)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--tf32", choices=["auto", "on", "off"], default="auto",
                    help="which f32 time is `us`: auto = TF32 on CUDA unless ENGRAM_TF32=off")
    a = ap.parse_args()
    spec = json.load(open(a.problems))
    device = torch.device(a.device)
    cuda = device.type == "cuda"
    if a.tf32 == "auto":
        tf32 = cuda and os.environ.get("ENGRAM_TF32", "on") != "off"
    else:
        tf32 = a.tf32 == "on"
    lists = {}
    for key in ["problems", "joined_adapter_products"]:
        rows = lists[key] = []
        for p in spec.get(key, []):
            lhs, rhs = operands(p, device)
            row = {"name": p["name"], "m": p["m"], "n": p["n"], "k": p["k"],
                   "dtype": p["dtype"], "layout": p["layout"]}
            if p["dtype"] == "f32" and cuda:
                for allow, field in [(False, "us_f32"), (True, "us_tf32")]:
                    torch.backends.cuda.matmul.allow_tf32 = allow
                    row[field] = time_call(lambda: torch.matmul(lhs, rhs), device, a.iters, a.warmup)
                torch.backends.cuda.matmul.allow_tf32 = False
                row["us"] = row["us_tf32"] if tf32 else row["us_f32"]
            else:
                row["us"] = time_call(lambda: torch.matmul(lhs, rhs), device, a.iters, a.warmup)
            flops = 2.0 * p["batch"] * p["m"] * p["n"] * p["k"]
            row["tflops"] = flops / (row["us"] * 1e-6) / 1e12
            rows.append(row)
            print(json.dumps(row), flush=True)
            del lhs, rhs
    name = torch.cuda.get_device_name(device) if cuda else "cpu"
    out = {"peer": "torch", "torch": torch.__version__, "device": name, "tf32": tf32,
           "iters": a.iters, "warmup": a.warmup, **lists}
    tmp = a.json + ".tmp"
    with open(tmp, "w") as f:
        json.dump(out, f, indent=1)
    os.replace(tmp, a.json)


if __name__ == "__main__":
    main()
