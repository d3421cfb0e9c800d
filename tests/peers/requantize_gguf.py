"""Rewrite a GGUF file with its quantized 2-D weights in another GGML block format.

Every tensor stored in blocks is dequantized (gguf-py's reference NumPy code) and quantized
again to --type (gguf-py quantizes Q4_0, Q4_1, Q5_0, Q5_1 and Q8_0; Q4_K is quantized here, by
GGML's reference layout with plain per-sub-block minimum/maximum scales), tensors whose rows are
not a whole number of Q4_K's 256-value super-blocks to --fallback (Q5_0, as llama.cpp's
quantizer does); float tensors and all metadata are copied unchanged. `engram bench generate --model FILE --peer llama.cpp` then
measures both engines on a format the published files use (SmolLM2-135M's Q4_K_M holds its
576-wide projections as Q5_0: 576 is not a whole number of 256-value K-quant super-blocks).

    python requantize_gguf.py IN.gguf OUT.gguf --type Q5_0
    python requantize_gguf.py IN.gguf OUT.gguf --type Q4_K --fallback Q5_0
"""

import argparse

import gguf
import numpy as np
from gguf import quants


def quantize_q4_k(x):
    """GGML's reference Q4_K quantizer (quantize_row_q4_K_ref) simplified: per 32-value
    sub-block min/max (no iterative refinement), 6-bit scales and minimums per super-block."""
    rows, cols = x.shape
    xb = x.reshape(-1, 8, 32).astype(np.float32)
    mn = np.minimum(xb.min(axis=2), 0.0)
    mx = xb.max(axis=2)
    scales = (mx - mn) / 15.0
    mins = -mn
    max_scale = scales.max(axis=1, keepdims=True)
    max_min = mins.max(axis=1, keepdims=True)
    inv_s = np.where(max_scale > 0, 63.0 / np.where(max_scale > 0, max_scale, 1), 0)
    inv_m = np.where(max_min > 0, 63.0 / np.where(max_min > 0, max_min, 1), 0)
    ls = np.clip(np.rint(inv_s * scales), 0, 63).astype(np.uint8)
    lm = np.clip(np.rint(inv_m * mins), 0, 63).astype(np.uint8)
    d = (max_scale[:, 0] / 63.0).astype(np.float16)
    dmin = (max_min[:, 0] / 63.0).astype(np.float16)
    packed = np.zeros((xb.shape[0], 12), np.uint8)
    packed[:, 0:4] = ls[:, 0:4]
    packed[:, 4:8] = lm[:, 0:4]
    packed[:, 8:12] = (ls[:, 4:8] & 0xF) | ((lm[:, 4:8] & 0xF) << 4)
    packed[:, 0:4] |= (ls[:, 4:8] >> 4) << 6
    packed[:, 4:8] |= (lm[:, 4:8] >> 4) << 6
    dj = d.astype(np.float32)[:, None] * ls.astype(np.float32)
    dm = dmin.astype(np.float32)[:, None] * lm.astype(np.float32)
    safe = np.where(dj > 0, dj, 1.0)
    L = np.where(dj[:, :, None] > 0, np.rint((xb + dm[:, :, None]) / safe[:, :, None]), 0)
    L = np.clip(L, 0, 15).astype(np.uint8)  # [blocks, 8, 32]
    qs = (L[:, 0::2, :] | (L[:, 1::2, :] << 4)).reshape(-1, 128)
    out = np.concatenate([d.view(np.uint8).reshape(-1, 2), dmin.view(np.uint8).reshape(-1, 2), packed, qs], axis=1)
    return out.reshape(rows, cols // 256 * 144)


def quantize(values, ty):
    """values [rows, cols] in block format `ty`, as the bytes GGUF stores."""
    if ty == gguf.GGMLQuantizationType.Q4_K:
        return quantize_q4_k(values)
    return quants.quantize(values, ty)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("src")
    p.add_argument("dst")
    kinds = ["Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "Q4_K"]
    p.add_argument("--type", default="Q5_0", choices=kinds)
    p.add_argument("--fallback", default="Q5_0", choices=kinds[:5])
    a = p.parse_args()
    target = gguf.GGMLQuantizationType[a.type]
    fallback = gguf.GGMLQuantizationType[a.fallback]
    reader = gguf.GGUFReader(a.src)
    arch = reader.fields[gguf.Keys.General.ARCHITECTURE].contents()
    writer = gguf.GGUFWriter(a.dst, arch)
    for field in reader.fields.values():
        if field.name == gguf.Keys.General.ARCHITECTURE or field.name.startswith("GGUF."):
            continue
        vtype = field.types[0]
        sub = field.types[-1] if vtype == gguf.GGUFValueType.ARRAY else None
        writer.add_key_value(field.name, field.contents(), vtype, sub_type=sub)
    out = []
    for t in reader.tensors:
        floats = t.tensor_type in (
            gguf.GGMLQuantizationType.F32,
            gguf.GGMLQuantizationType.F16,
            gguf.GGMLQuantizationType.BF16,
        )
        if floats:
            out.append((t.name, np.asarray(t.data), t.tensor_type))
            continue
        shape = [int(d) for d in reversed(t.shape)]  # rows first, as NumPy holds them
        values = quants.dequantize(t.data, t.tensor_type).reshape(shape).astype(np.float32)
        ty = target
        if target == gguf.GGMLQuantizationType.Q4_K and shape[-1] % 256:
            ty = fallback
        out.append((t.name, quantize(values, ty), ty))
    for name, data, ty in out:
        writer.add_tensor(name, data, raw_dtype=ty)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    counts = {}
    for _, _, ty in out:
        counts[ty.name] = counts.get(ty.name, 0) + 1
    print(f"{a.dst}: {counts}")


if __name__ == "__main__":
    main()
