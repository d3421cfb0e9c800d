#!/usr/bin/env python3
"""llama.cpp's own quantizers on f32 values: the bytes `ggml_quantize_chunk` writes (the
function `llama-quantize` calls per tensor; without an importance matrix it runs the reference
`quantize_row_*_ref` code), for comparing with engram's writer byte for byte. GGML is the one
inside llama.cpp's server package (PyPI `xllamacpp`, which exports the symbol), called through
ctypes.

    pip install xllamacpp==2026.10.11549
Usage: python ggml_quantize.py TYPE_ID N_PER_ROW IN.f32 OUT.bin
IN.f32 holds little-endian f32 values, a whole number of rows of N_PER_ROW; OUT.bin receives
the quantized rows.
"""
import ctypes
import glob
import os
import sys


def main():
    type_id, n_per_row = int(sys.argv[1]), int(sys.argv[2])
    src = open(sys.argv[3], "rb").read()
    import xllamacpp

    so = glob.glob(os.path.join(os.path.dirname(xllamacpp.__file__), "xllamacpp*.so"))[0]
    lib = ctypes.CDLL(so)
    row_size = lib.ggml_row_size
    row_size.restype = ctypes.c_size_t
    row_size.argtypes = [ctypes.c_int, ctypes.c_int64]
    quantize = lib.ggml_quantize_chunk
    quantize.restype = ctypes.c_size_t
    quantize.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_void_p, ctypes.c_int64,
                         ctypes.c_int64, ctypes.c_int64, ctypes.c_void_p]
    rows = len(src) // 4 // n_per_row
    out = ctypes.create_string_buffer(rows * row_size(type_id, n_per_row))
    n = quantize(type_id, src, out, 0, rows, n_per_row, None)
    open(sys.argv[4], "wb").write(out.raw[:n])


if __name__ == "__main__":
    main()
