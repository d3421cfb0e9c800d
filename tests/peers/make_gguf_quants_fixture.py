"""GGML block formats with gguf-py's dequantization as the reference (tests/fixtures/gguf-quants/):

  blocks.gguf              one 3 x 512 tensor per format (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K,
                           Q5_K, Q6_K), random block bytes with sane f16 scales, written by
                           gguf-py's GGUFWriter (the llama.cpp project's Python package)
  reference.safetensors    the same tensors dequantized to f32 by gguf.quants.dequantize
                           (NumPy ports of llama.cpp's dequantize_row_*)

    pip install gguf==0.19.0 numpy safetensors
    python tests/peers/make_gguf_quants_fixture.py tests/fixtures/gguf-quants
"""

import importlib.metadata
import os
import sys

import gguf
import numpy as np
from gguf import GGMLQuantizationType as T
from gguf.quants import dequantize
from safetensors.numpy import save_file

ROWS, COLS = 3, 512
# Byte offsets of each block's f16 fields: the scale first, then (where there is one) the
# minimum. Everything else in a block is random.
F16_FIELDS = {
    T.Q4_0: [0],
    T.Q4_1: [0, 2],
    T.Q5_0: [0],
    T.Q5_1: [0, 2],
    T.Q8_0: [0],
    T.Q4_K: [0, 2],
    T.Q5_K: [0, 2],
    T.Q6_K: [208],
}


def main(out_dir):
    os.makedirs(out_dir, exist_ok=True)
    rng = np.random.default_rng(20261202)
    writer = gguf.GGUFWriter(os.path.join(out_dir, "blocks.gguf"), "llama")
    reference = {}
    for ty, fields in F16_FIELDS.items():
        block_elems, block_bytes = gguf.GGML_QUANT_SIZES[ty]
        n = ROWS * COLS // block_elems
        raw = rng.integers(0, 256, size=(n, block_bytes), dtype=np.uint8)
        for i, off in enumerate(fields):
            v = rng.uniform(0.001, 0.05, n).astype(np.float16)
            if i == 1 and ty in (T.Q4_1, T.Q5_1):
                v = -v  # Q4_1/Q5_1 add their minimum; the K-quants subtract dmin·m
            raw[:, off : off + 2] = v.view(np.uint8).reshape(n, 2)
        raw = raw.reshape(ROWS, COLS // block_elems * block_bytes)
        name = f"{ty.name.lower()}.weight"
        writer.add_tensor(name, raw, raw_dtype=ty)
        values = dequantize(raw, ty).reshape(ROWS, COLS).astype(np.float32)
        assert np.isfinite(values).all(), ty.name
        reference[name] = values
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    save_file(reference, os.path.join(out_dir, "reference.safetensors"),
              metadata={"gguf_py": importlib.metadata.version("gguf")})


if __name__ == "__main__":
    main(sys.argv[1])
