//! Generation: batched, left-padded prompts give the same tokens as one-by-one generation; stop
//! ids end rows; sampling is seeded.

use engram_model::{GenerationConfig, Sampling, generate};
use engram_testkit::*;

fn prompts() -> Vec<Vec<u32>> {
    let reference = Reference::open(&fixture("tiny-f32").join("reference.safetensors"));
    let long = reference.ids("input_ids_long_text");
    vec![
        long[..7].to_vec(),
        long[..40].to_vec(),
        reference.ids("input_ids_short_fixed"),
        long[10..13].to_vec(),
        reference.ids("input_ids_chat_prompt"),
    ]
}

#[test]
fn batched_with_padding_equals_one_by_one() {
    for name in ["tiny-f32", "tiny-bf16-tied"] {
        let model = load(name);
        let cfg = GenerationConfig {
            max_new_tokens: 12,
            sampling: Sampling::Greedy,
            stop_ids: vec![],
            ..Default::default()
        };
        let ps = prompts();
        let batched = generate(&model, &ps, &cfg).unwrap();
        for (i, p) in ps.iter().enumerate() {
            let single = generate(&model, std::slice::from_ref(p), &cfg).unwrap();
            assert_eq!(
                batched.tokens[i],
                single.tokens[0],
                "{name}: row {i} (len {})",
                p.len()
            );
        }
    }
}

#[test]
fn padded_prefill_and_decode_logits_equal_unpadded() {
    let model = load("tiny-f32");
    let ps = prompts();
    let longest = ps.iter().map(Vec::len).max().unwrap();
    let rows: Vec<Vec<u32>> = ps
        .iter()
        .map(|p| {
            let mut r = vec![0u32; longest - p.len()];
            r.extend(p);
            r
        })
        .collect();
    let mut cache = model.new_cache(ps.iter().map(|p| longest - p.len()).collect());
    let h = model.step(&rows, &mut cache);
    let next = vec![vec![7u32]; ps.len()];
    let h2 = model.step(&next, &mut cache);
    let host = |t: burn::tensor::Tensor<2>| -> Vec<f32> {
        t.into_data().try_into_vec_as::<f32>().unwrap()
    };
    let (h, h2) = (host(h), host(h2));
    let width = model.config.hidden_size;
    for (i, p) in ps.iter().enumerate() {
        let mut c = model.new_cache(vec![0]);
        let want = host(model.step(std::slice::from_ref(p), &mut c));
        let want2 = host(model.step(&[vec![7u32]], &mut c));
        let d = max_abs_diff(&h[i * width..(i + 1) * width], &want);
        let d2 = max_abs_diff(&h2[i * width..(i + 1) * width], &want2);
        assert!(
            d <= 1e-5 && d2 <= 1e-5,
            "row {i}: prefill diff {d:e}, decode diff {d2:e}"
        );
    }
}

#[test]
fn kv_cache_decoding_equals_full_recompute() {
    let model = load("tiny-f32");
    let p = prompts()[1].clone();
    let cfg = GenerationConfig {
        max_new_tokens: 10,
        sampling: Sampling::Greedy,
        stop_ids: vec![],
        ..Default::default()
    };
    let cached = generate(&model, std::slice::from_ref(&p), &cfg)
        .unwrap()
        .tokens[0]
        .clone();
    let mut seq = p;
    let v = model.config.vocab_size;
    for want in cached {
        let l = logits(&model, &seq);
        let last = &l[l.len() - v..];
        let got = engram_model::argmax(last) as u32;
        assert_eq!(got, want);
        seq.push(got);
    }
}

#[test]
fn stop_ids_end_rows_and_are_not_returned() {
    let model = load("tiny-f32");
    let ps = prompts();
    let free = generate(
        &model,
        &ps,
        &GenerationConfig {
            max_new_tokens: 8,
            sampling: Sampling::Greedy,
            stop_ids: vec![],
            ..Default::default()
        },
    )
    .unwrap();
    // Stop on the 3rd token row 0 would produce: row 0 ends after 2 tokens.
    let stop = free.tokens[0][2];
    let out = generate(
        &model,
        &ps,
        &GenerationConfig {
            max_new_tokens: 8,
            sampling: Sampling::Greedy,
            stop_ids: vec![stop],
            ..Default::default()
        },
    )
    .unwrap();
    let first = free.tokens[0].iter().position(|&t| t == stop).unwrap();
    assert_eq!(out.tokens[0], free.tokens[0][..first].to_vec());
    assert!(out.stopped[0]);
    for (i, row) in out.tokens.iter().enumerate() {
        assert!(!row.contains(&stop), "row {i} kept the stop id");
        let n = free.tokens[i].iter().position(|&t| t == stop).unwrap_or(8);
        assert_eq!(row, &free.tokens[i][..n], "row {i}");
    }
}

#[test]
fn sampling_is_seeded() {
    let model = load("tiny-f32");
    let ps = prompts();
    let run = |seed| {
        let cfg = GenerationConfig {
            max_new_tokens: 10,
            sampling: Sampling::TopP {
                temperature: 1.5,
                top_p: 0.95,
                seed,
            },
            stop_ids: vec![],
            ..Default::default()
        };
        generate(&model, &ps[..2], &cfg).unwrap().tokens
    };
    assert_eq!(run(3), run(3));
    assert_ne!(run(3), run(4));
}

#[test]
fn prompt_longer_than_context_is_refused() {
    let model = load("tiny-f32");
    let long = vec![5u32; model.config.max_position_embeddings + 1];
    let e = generate(&model, &[long], &GenerationConfig::default())
        .unwrap_err()
        .to_string();
    assert!(e.contains("context window"), "{e}");
    let e = generate(&model, &[vec![]], &GenerationConfig::default())
        .unwrap_err()
        .to_string();
    assert!(e.contains("empty"), "{e}");
}

#[test]
fn chunked_prefill_equals_one_pass() {
    let model = load("tiny-f32");
    // 1,200 tokens: three prefill chunks of 512.
    let ids: Vec<u32> = (0..1200u32).map(|i| (i * 7919 + 13) % 1792).collect();
    let (head, last) = ids.split_at(ids.len() - 1);
    let mut cache = model.prefill(head);
    assert_eq!(cache.len, head.len());
    let h = model.step(&[last.to_vec()], &mut cache);
    let got: Vec<f32> = model
        .logits(h.unsqueeze_dim(1))
        .into_data()
        .try_into_vec_as::<f32>()
        .unwrap();
    let full = logits(&model, &ids);
    let v = model.config.vocab_size;
    let d = max_abs_diff(&got, &full[full.len() - v..]);
    assert!(d < 1e-4, "{d}");
}

#[test]
fn forced_logprobs_equal_transformers_log_softmax() {
    // The log-probability of each next token of a text, fed one token at a time after a
    // 20-token prompt, against log_softmax of transformers' logits over the whole text.
    let model = load("tiny-f32");
    let reference = Reference::open(&fixture("tiny-f32").join("reference.safetensors"));
    let ids = reference.ids("input_ids_long_text");
    let logits = reference.f32("logits_long_text");
    let v = model.config.vocab_size;
    let (prompt, forced) = ids[..40].split_at(20);
    let got = engram_model::forced_logprobs(&model, prompt, forced).unwrap();
    assert_eq!(got.len(), forced.len());
    for (k, (&t, lp)) in forced.iter().zip(&got).enumerate() {
        let row = &logits[(19 + k) * v..(20 + k) * v];
        let max = row.iter().fold(f32::NEG_INFINITY, |a, &x| a.max(x)) as f64;
        let lse = max
            + row
                .iter()
                .map(|&x| (x as f64 - max).exp())
                .sum::<f64>()
                .ln();
        let want = row[t as usize] as f64 - lse;
        assert!((lp - want).abs() < 1e-4, "token {k}: {lp} vs {want}");
    }
    let e = engram_model::forced_logprobs(&model, prompt, &[v as u32]).unwrap_err();
    assert!(e.to_string().contains("outside the vocabulary"), "{e}");
}
