//! The same transformers parity check on the wgpu backend (when engram-model is built with its
//! `wgpu` feature, as the workspace's tests build it through the CLI's default features; on a
//! machine without a GPU it runs on Mesa's software Vulkan device, llvmpipe).

use engram_checkpoint::Checkpoint;
use engram_model::{GenerationConfig, Llama, Sampling, WeightDType, device_from_name, generate};
use engram_testkit::*;

#[test]
fn tiny_f32_on_wgpu_matches_transformers() {
    if !engram_model::available_backends().contains(&"wgpu") {
        eprintln!("SKIPPED: engram-model was built without its `wgpu` feature");
        return;
    }
    let device = device_from_name("wgpu").unwrap();
    let ckpt = Checkpoint::open(fixture("tiny-f32").to_str().unwrap()).unwrap();
    let model = Llama::load(&ckpt, WeightDType::F32, &device).unwrap();
    let reference = Reference::open(&fixture("tiny-f32").join("reference.safetensors"));
    // llvmpipe compiles a shader for every new shape, so keep this short: two prompts and a few
    // greedy steps (each decode step has a new cache length).
    for case in ["short_fixed", "chat_prompt"] {
        let ids = reference.ids(&format!("input_ids_{case}"));
        let (_, want) = reference.shaped(&format!("logits_{case}"));
        let d = max_abs_diff(&logits(&model, &ids), &want);
        eprintln!("wgpu {case}: max |Δlogit| = {d:.3e}");
        assert!(d <= 1e-4, "wgpu {case}: max |Δlogit| {d:e}");
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
            "wgpu {case}"
        );
    }
}
