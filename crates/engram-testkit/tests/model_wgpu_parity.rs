//! The same transformers parity check on the wgpu backend (when engram-model is built with its
//! `wgpu` feature, as the workspace's tests build it through the CLI's default features; on a
//! machine without a GPU it runs on Mesa's software Vulkan device, llvmpipe): the Llama fixture,
//! and the Qwen2 (q/k/v biases, in the joined q/k/v product on wgpu) and Qwen3 (per-head q/k
//! norms) ones.

use engram_checkpoint::Checkpoint;
use engram_model::{GenerationConfig, Llama, Sampling, WeightDType, device_from_name, generate};
use engram_testkit::*;

#[test]
fn tiny_f32_on_wgpu_matches_transformers() {
    on_wgpu_matches_transformers("tiny-f32");
}

#[test]
fn tiny_qwen2_and_qwen3_on_wgpu_match_transformers() {
    on_wgpu_matches_transformers("tiny-qwen2");
    on_wgpu_matches_transformers("tiny-qwen3");
}

fn on_wgpu_matches_transformers(name: &str) {
    if !engram_model::available_backends().contains(&"wgpu") {
        eprintln!("SKIPPED: engram-model was built without its `wgpu` feature");
        return;
    }
    let device = device_from_name("wgpu").unwrap();
    let ckpt = Checkpoint::open(fixture(name).to_str().unwrap()).unwrap();
    let model = Llama::load(&ckpt, WeightDType::F32, &device).unwrap();
    let reference = Reference::open(&fixture(name).join("reference.safetensors"));
    // llvmpipe compiles a shader for every new shape, so keep this short: two prompts and a few
    // greedy steps (each decode step has a new cache length).
    for case in ["short_fixed", "chat_prompt"] {
        let ids = reference.ids(&format!("input_ids_{case}"));
        let (_, want) = reference.shaped(&format!("logits_{case}"));
        let d = max_abs_diff(&logits(&model, &ids), &want);
        eprintln!("wgpu {name} {case}: max |Δlogit| = {d:.3e}");
        assert!(d <= 1e-4, "wgpu {name} {case}: max |Δlogit| {d:e}");
        let greedy = reference.ids(&format!("greedy_{case}"))[..4].to_vec();
        let cfg = GenerationConfig {
            max_new_tokens: greedy.len(),
            sampling: Sampling::Greedy,
            stop_ids: vec![],
            ..Default::default()
        };
        assert_eq!(
            generate(&model, &[ids], &cfg).unwrap().tokens[0],
            greedy,
            "wgpu {name} {case}"
        );
    }
}
