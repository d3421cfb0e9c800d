//! engram's GGML writers against llama.cpp's: every block format engram writes, on random
//! weights of varied shape and scale and on a real SmolLM2-135M weight matrix, quantized by
//! engram ([`encode`]) and by llama.cpp's own GGML (`ggml_quantize_chunk`, through
//! `tests/peers/ggml_quantize.py` and the Python `ENGRAM_TEST_PEER_PYTHON` names, with PyPI
//! `xllamacpp`), must be the same bytes.

use std::path::{Path, PathBuf};
use std::process::Command;

use engram_checkpoint::gguf::{GgmlType, GgufFile, encode};

/// llama.cpp's bytes for `values` (rows of `n_per_row`) as `ty`.
fn ggml(python: &str, dir: &Path, ty: GgmlType, n_per_row: usize, values: &[f32]) -> Vec<u8> {
    let script =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/peers/ggml_quantize.py");
    let (input, output) = (dir.join("in.f32"), dir.join("out.bin"));
    let raw: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
    std::fs::write(&input, raw).unwrap();
    let out = Command::new(python)
        .arg(script)
        .arg(ty.id().to_string())
        .arg(n_per_row.to_string())
        .arg(&input)
        .arg(&output)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "ggml_quantize.py: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    std::fs::read(&output).unwrap()
}

/// Random rows: Gaussian-like values at a scale that changes every 256 weights, with exact
/// zeros, constant runs, all-positive runs and outliers — the cases where the quantizers'
/// searches and edge rules decide.
fn random_rows(rows: usize, cols: usize, seed: u64) -> Vec<f32> {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut uniform = move || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        (s >> 40) as f32 / (1u64 << 24) as f32
    };
    let mut out = Vec::with_capacity(rows * cols);
    for i in 0..rows * cols {
        let scale = 0.001 * (1 + (i / 256) % 13) as f32;
        let g = (0..4).map(|_| uniform()).sum::<f32>() - 2.0;
        out.push(match (i / 32) % 29 {
            0 => 0.0,
            1 => 0.25 * scale,
            2 => (g * scale).abs(),
            _ if i % 211 == 0 => 20.0 * scale * g.signum(),
            _ => g * scale,
        });
    }
    out
}

#[test]
fn engram_writes_the_bytes_llama_cpp_writes() {
    let Ok(python) = std::env::var("ENGRAM_TEST_PEER_PYTHON") else {
        eprintln!("SKIPPED: ENGRAM_TEST_PEER_PYTHON (a Python with xllamacpp) is not set");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let mut cases: Vec<(String, usize, Vec<f32>)> =
        vec![("random 64×1024".into(), 1024, random_rows(64, 1024, 5))];
    if let Some(path) =
        engram_checkpoint::model_store::find("smollm2-135m-instruct").and_then(|m| m.cached())
    {
        let f = GgufFile::open(&path).unwrap();
        let name = "blk.3.ffn_down.weight";
        let cols = f.tensors[name].dims[0] as usize;
        cases.push((format!("SmolLM2 {name}"), cols, f.read_f32(name).unwrap()));
    } else {
        eprintln!("SmolLM2-135M-Instruct is not cached: random weights only");
    }
    for (what, cols, values) in &cases {
        for id in [2, 3, 6, 7, 8, 12, 13, 14] {
            let ty = GgmlType::from_id(id).unwrap();
            let ours = encode(ty, values);
            let theirs = ggml(&python, dir.path(), ty, *cols, values);
            assert_eq!(ours.len(), theirs.len(), "{what} {}", ty.name());
            let bb = ty.block_bytes();
            let differ = ours
                .chunks(bb)
                .zip(theirs.chunks(bb))
                .filter(|(a, b)| a != b)
                .count();
            assert_eq!(
                differ,
                0,
                "{what} as {}: {differ} of {} blocks differ from llama.cpp's",
                ty.name(),
                ours.len() / bb
            );
            eprintln!(
                "{what} as {}: {} blocks, identical",
                ty.name(),
                ours.len() / bb
            );
        }
    }
}
