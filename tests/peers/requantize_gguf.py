"""Rewrite a GGUF file with its quantized 2-D weights in another GGML block format.

Every tensor stored in blocks is dequantized (gguf-py's reference NumPy code) and quantized
again to --type (gguf-py quantizes Q4_0, Q4_1, Q5_0, Q5_1 and Q8_0); float tensors and all
metadata are copied unchanged. `engram bench generate --model FILE --peer llama.cpp` then
measures both engines on a format the published files use (SmolLM2-135M's Q4_K_M holds its
576-wide projections as Q5_0: 576 is not a whole number of 256-value K-quant super-blocks).

    python requantize_gguf.py IN.gguf OUT.gguf --type Q5_0
"""

import argparse

import gguf
import numpy as np
from gguf import quants


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("src")
    p.add_argument("dst")
    p.add_argument("--type", default="Q5_0", choices=["Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0"])
    a = p.parse_args()
    target = gguf.GGMLQuantizationType[a.type]
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
        out.append((t.name, quants.quantize(values, target), target))
    for name, data, ty in out:
        writer.add_tensor(name, data, raw_dtype=ty)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    print(f"{a.dst}: {sum(1 for _, _, ty in out if ty == target)} tensors as {a.type}")


if __name__ == "__main__":
    main()
