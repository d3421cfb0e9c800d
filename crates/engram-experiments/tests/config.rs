//! Experiment files and presets: the shipped ones load, unknown keys and missing presets are
//! errors that name the key and the file, and impossible fact counts are named.

use std::path::{Path, PathBuf};

use engram_experiments::expand_cells as expand;
use engram_experiments::{Experiment, ExperimentError, default_configs_dir};
use engram_experiments::{load_pool, samples};

fn repo() -> PathBuf {
    Path::new(&std::env::var("CARGO_MANIFEST_DIR").expect("cargo test sets CARGO_MANIFEST_DIR"))
        .join("../..")
}

#[test]
fn shipped_experiments_load() {
    let table5 = repo().join("experiments/enronqa-table5.toml");
    let exp = Experiment::load(&table5, &default_configs_dir(&table5)).unwrap();
    assert_eq!(exp.name, "enronqa-table5");
    assert_eq!(exp.model.source, "meta-llama/Llama-3.1-8B-Instruct");
    assert_eq!(exp.training.train.lr, 1e-4);
    assert_eq!(exp.training.lora.alpha_per_rank, 4.0);
    assert_eq!(exp.training.lora.targets.len(), 7);
    // 7 fact counts × (long context + RAG + 9 ranks), as Table 5.
    assert_eq!(expand(&exp).len(), 77);

    let smoke = repo().join("experiments/smoke.toml");
    let exp = Experiment::load(&smoke, &default_configs_dir(&smoke)).unwrap();
    assert_eq!(exp.training.train.lr, 2e-3, "[override.training] applies");
    assert_eq!(exp.training.train.warmup_epochs, 2.0);
    assert_eq!(
        exp.training.train.epochs, 10,
        "the preset's other keys stay"
    );
    let (pool, _) = load_pool(&exp).unwrap();
    let s = samples(&exp, &pool, "smoke").unwrap();
    assert_eq!(s.sizes(), vec![10, 20]);
    assert_eq!(exp.methods.replicates, 3);
    // 2 fact counts × (long context + RAG + 2 ranks × 3 replicates).
    assert_eq!(expand(&exp).len(), 16);
    assert!(pool.iter().all(|f| f.id.starts_with("synthetic-")));
    assert!(pool.iter().all(|f| f.question != f.rephrased_question));
}

/// A scratch tree: configs/{models,training,judges} and experiments/x.toml.
struct Tree {
    dir: tempfile::TempDir,
}

impl Tree {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let t = Self { dir };
        t.write("configs/models/m.toml", "source = \"some/model\"\n");
        t.write("configs/training/t.toml", "epochs = 3\n");
        t.write("configs/judges/j.toml", "kind = \"token-f1\"\n");
        t.write("experiments/facts.jsonl", &facts(5));
        t
    }
    fn write(&self, rel: &str, text: &str) -> PathBuf {
        let p = self.dir.path().join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, text).unwrap();
        p
    }
    fn experiment(&self, extra: &str) -> Result<Experiment, ExperimentError> {
        let text = format!(
            "model = \"m\"\ntraining = \"t\"\njudge = \"j\"\n{extra}\n[facts]\nsource = \"jsonl\"\npath = \"facts.jsonl\"\nsizes = [2, 4]\n\n[methods]\nlora_ranks = [4]\n"
        );
        let p = self.write("experiments/x.toml", &text);
        Experiment::load(&p, &default_configs_dir(&p))
    }
}

fn facts(n: usize) -> String {
    (0..n)
        .map(|i| format!("{{\"id\": \"f{i}\", \"question\": \"q{i}?\", \"rephrased_question\": \"r{i}?\", \"answer\": \"a{i}\"}}\n"))
        .collect()
}

#[test]
fn a_minimal_experiment_loads_with_defaults() {
    let t = Tree::new();
    let exp = t.experiment("").unwrap();
    assert_eq!(exp.name, "x");
    assert_eq!(exp.training.train.epochs, 3);
    assert_eq!(exp.training.train.lr, 1e-4, "default from the paper");
    assert_eq!(exp.backend, "cpu");
}

#[test]
fn answers_can_run_llama_cpp_s_products_and_the_default_keeps_the_old_hashes() {
    use engram_model::cpu_matmul::QuantizedProduct;
    let t = Tree::new();
    let q8 = t.experiment("[answer]\nmatmul = \"q8\"").unwrap();
    assert_eq!(q8.answer.matmul, QuantizedProduct::Q8);
    assert_eq!(serde_json::to_value(&q8.answer).unwrap()["matmul"], "q8");
    // Exact is the default, and left out of what the cells' hashes read, so results made
    // before the key existed stay done.
    let exact = t.experiment("").unwrap();
    assert_eq!(exact.answer.matmul, QuantizedProduct::Exact);
    let json = serde_json::to_value(&exact.answer).unwrap();
    assert_eq!(
        json,
        serde_json::json!({"batch_size": 8, "max_new_tokens": 32})
    );
    let e = t
        .experiment("[answer]\nmatmul = \"q4\"")
        .unwrap_err()
        .to_string();
    assert!(e.contains("x.toml") && e.contains("q4"), "{e}");
}

#[test]
fn unknown_keys_are_named_with_their_file() {
    let t = Tree::new();
    let e = t.experiment("learning_rate = 3").unwrap_err().to_string();
    assert!(e.contains("x.toml") && e.contains("learning_rate"), "{e}");

    let e = t
        .experiment("[override.training]\nlearnig_rate = 1e-3")
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("x.toml") && e.contains("[override.training]") && e.contains("learnig_rate"),
        "{e}"
    );

    t.write("configs/training/t.toml", "epochs = 3\ndropuot = 0.1\n");
    let e = t.experiment("").unwrap_err().to_string();
    assert!(e.contains("t.toml") && e.contains("dropuot"), "{e}");
    t.write("configs/training/t.toml", "epochs = 3\n");

    t.write(
        "configs/judges/j.toml",
        "kind = \"token-f1\"\nthreshhold = 0.4\n",
    );
    let e = t.experiment("").unwrap_err().to_string();
    assert!(e.contains("j.toml") && e.contains("threshhold"), "{e}");
    // The preset without settings refuses them too.
    t.write(
        "configs/judges/j.toml",
        "kind = \"exact-match\"\nthreshold = 0.8\n",
    );
    let e = t.experiment("").unwrap_err().to_string();
    assert!(e.contains("j.toml") && e.contains("threshold"), "{e}");
}

/// Training settings that no cell could train with are named when the experiment loads, not
/// after a cell has loaded its model.
#[test]
fn impossible_training_settings_are_named_at_load() {
    let t = Tree::new();
    for (extra, said) in [
        ("lr = 0", "lr = 0: must be a positive number"),
        ("weight_decay = -0.1", "weight_decay = -0.1"),
        ("pack_length = 128", "pack_length applies to layout"),
        ("dropout = 1.0", "dropout"),
        ("graph = true\ngrad_accum = 65", "grad_accum = 65"),
    ] {
        let e = t
            .experiment(&format!("[override.training]\n{extra}"))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("x.toml") && e.contains("rank 4") && e.contains(said),
            "{extra}: {e}"
        );
    }
    // A setting of an export that is not asked for.
    let e = t
        .experiment("[export]\ngguf_dtype = \"f32\"")
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("export.gguf_dtype is for export.gguf = true"),
        "{e}"
    );
    t.experiment("[export]\ngguf = true\ngguf_dtype = \"f32\"")
        .unwrap();
}

#[test]
fn missing_presets_and_impossible_sizes_are_named() {
    let t = Tree::new();
    let p = t.write(
        "experiments/y.toml",
        "model = \"nope\"\ntraining = \"t\"\njudge = \"j\"\n[facts]\nsource = \"jsonl\"\npath = \"facts.jsonl\"\nsizes = [2]\n[methods]\nrag = true\n",
    );
    let e = Experiment::load(&p, &default_configs_dir(&p))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("y.toml") && e.contains("models preset `nope`") && e.contains("nope.toml"),
        "{e}"
    );

    let exp = t.experiment("").unwrap();
    let (pool, src) = load_pool(&exp).unwrap();
    let mut big = exp.clone();
    big.facts.sizes = vec![2, 50];
    let e = samples(&big, &pool, &src).unwrap_err().to_string();
    assert!(
        e.contains("x.toml") && e.contains("asks for 50 facts") && e.contains("only 5"),
        "{e}"
    );

    let e = t.experiment("").map(|_| ()).and_then(|_| {
        t.write("experiments/facts.jsonl", "");
        load_pool(&exp).map(|_| ())
    });
    let e = e.unwrap_err().to_string();
    assert!(e.contains("facts.jsonl"), "{e}");
}

#[test]
fn replicates_are_cells_of_their_own_and_the_first_keeps_its_hash() {
    use engram_experiments::cell_config;
    use engram_experiments::hash_json;
    let t = Tree::new();
    let text = |replicates: &str| {
        format!(
            "model = \"m\"\ntraining = \"t\"\njudge = \"j\"\n[facts]\nsource = \"jsonl\"\npath = \"facts.jsonl\"\nsizes = [2, 4]\n\n[methods]\nlora_ranks = [4]\nrag = true\n{replicates}\n"
        )
    };
    let load = |extra: &str| {
        let p = t.write("experiments/x.toml", &text(extra));
        Experiment::load(&p, &default_configs_dir(&p))
    };
    let one = load("").unwrap();
    let three = load("replicates = 3").unwrap();
    let ids = |e: &Experiment| expand(e).iter().map(|c| c.id()).collect::<Vec<_>>();
    assert_eq!(ids(&one), ["n2-rag", "n2-lora-r4", "n4-rag", "n4-lora-r4"]);
    assert_eq!(
        ids(&three),
        [
            "n2-rag",
            "n2-lora-r4",
            "n2-lora-r4-rep1",
            "n2-lora-r4-rep2",
            "n4-rag",
            "n4-lora-r4",
            "n4-lora-r4-rep1",
            "n4-lora-r4-rep2"
        ]
    );
    let (pool, src) = load_pool(&three).unwrap();
    let s = samples(&three, &pool, &src).unwrap();
    let cells = expand(&three);
    let hash = |e: &Experiment, i: usize| hash_json(&cell_config(e, &cells[i], s.of(&cells[i])));
    // The first replicate (and RAG) hash as without replicates: their records stay done.
    assert_eq!(hash(&three, 0), hash(&one, 0));
    assert_eq!(hash(&three, 1), hash(&one, 1));
    // Further replicates train with seeds of their own.
    let cfg = cell_config(&three, &cells[2], s.of(&cells[2]));
    assert_eq!(cfg["training"]["seed"], three.training.train.seed + 1);
    assert_eq!(cfg["replicate"], 1);
    assert_ne!(hash(&three, 2), hash(&three, 1));
    assert_ne!(hash(&three, 3), hash(&three, 2));

    let e = load("replicates = 0").unwrap_err().to_string();
    assert!(
        e.contains("x.toml") && e.contains("methods.replicates = 0"),
        "{e}"
    );
    let e = load("replicate = 2").unwrap_err().to_string();
    assert!(e.contains("x.toml") && e.contains("replicate"), "{e}");
}

#[test]
fn resampled_facts_give_every_method_a_run_per_replicate_on_facts_of_its_own() {
    use engram_experiments::cell_config;
    use engram_experiments::hash_json;
    let t = Tree::new();
    t.write("experiments/facts.jsonl", &facts(12));
    let load = |extra: &str| {
        let text = format!(
            "model = \"m\"\ntraining = \"t\"\njudge = \"j\"\n[facts]\nsource = \"jsonl\"\npath = \"facts.jsonl\"\nsizes = [2, 4]\n\n[methods]\nlora_ranks = [4]\nrag = true\n{extra}\n"
        );
        let p = t.write("experiments/x.toml", &text);
        Experiment::load(&p, &default_configs_dir(&p))
    };
    let same = load("replicates = 2").unwrap();
    let fresh = load("replicates = 2\nresample_facts = true").unwrap();
    let ids: Vec<String> = expand(&fresh).iter().map(|c| c.id()).collect();
    assert_eq!(
        ids,
        [
            "n2-rag",
            "n2-rag-rep1",
            "n2-lora-r4",
            "n2-lora-r4-rep1",
            "n4-rag",
            "n4-rag-rep1",
            "n4-lora-r4",
            "n4-lora-r4-rep1"
        ]
    );
    let (pool, src) = load_pool(&fresh).unwrap();
    let (s_same, s_fresh) = (
        samples(&same, &pool, &src).unwrap(),
        samples(&fresh, &pool, &src).unwrap(),
    );
    assert_eq!((s_same.draws(), s_fresh.draws()), (1, 2));
    let cells = expand(&fresh);
    let fact_ids = |f: &[engram_facts::Fact]| f.iter().map(|f| f.id.clone()).collect::<Vec<_>>();
    // Replicate 0 keeps the experiment's sample (and so its hash); replicate 1 draws its own,
    // nested across sizes like the first, and RAG and LoRA of one replicate share it.
    assert_eq!(
        fact_ids(s_fresh.of(&cells[0])),
        fact_ids(s_same.of(&cells[0]))
    );
    let (rag1, lora1, rag1_n4) = (&cells[1], &cells[3], &cells[5]);
    assert_ne!(fact_ids(s_fresh.of(rag1)), fact_ids(s_fresh.of(&cells[0])));
    assert_eq!(fact_ids(s_fresh.of(rag1)), fact_ids(s_fresh.of(lora1)));
    assert_eq!(s_fresh.of(rag1_n4)[..2], *s_fresh.of(rag1));
    let hash = |e: &Experiment, s: &engram_experiments::Samples, i: usize| {
        let c = &expand(e)[i];
        hash_json(&cell_config(e, c, s.of(c)))
    };
    let same_rag = expand(&same)
        .iter()
        .position(|c| c.id() == "n2-rag")
        .unwrap();
    assert_eq!(hash(&fresh, &s_fresh, 0), hash(&same, &s_same, same_rag));
    let cfg = cell_config(&fresh, rag1, s_fresh.of(rag1));
    assert_eq!(cfg["replicate"], 1);

    let e = load("resample_facts = true").unwrap_err().to_string();
    assert!(
        e.contains("x.toml") && e.contains("methods.resample_facts = true"),
        "{e}"
    );
}

#[test]
fn a_rank_of_its_own_lr_changes_that_rank_cells_alone() {
    use engram_experiments::cell_config;
    use engram_experiments::hash_json;
    let t = Tree::new();
    let load = |extra: &str| {
        let text = format!(
            "model = \"m\"\ntraining = \"t\"\njudge = \"j\"\n[facts]\nsource = \"jsonl\"\npath = \"facts.jsonl\"\nsizes = [2]\n\n[methods]\nlora_ranks = [4, 8]\nrag = false\nlong_context = false\n{extra}\n"
        );
        let p = t.write("experiments/x.toml", &text);
        Experiment::load(&p, &default_configs_dir(&p))
    };
    let plain = load("").unwrap();
    let own = load("[override.training]\nlr_by_rank = { 8 = 5e-4 }").unwrap();
    let cells = expand(&own);
    let ids: Vec<String> = cells.iter().map(|c| c.id()).collect();
    assert_eq!(ids, ["n2-lora-r4", "n2-lora-r8"]);
    let (pool, src) = load_pool(&own).unwrap();
    let s = samples(&own, &pool, &src).unwrap();
    let cfg = |e: &Experiment, i: usize| cell_config(e, &cells[i], s.of(&cells[i]));
    assert_eq!(hash_json(&cfg(&own, 0)), hash_json(&cfg(&plain, 0)));
    assert_ne!(hash_json(&cfg(&own, 1)), hash_json(&cfg(&plain, 1)));
    assert_eq!(cfg(&own, 1)["training"]["lr"], 5e-4);
    assert_eq!(cfg(&own, 0)["training"]["lr"], 1e-4);
    assert_eq!(own.training.train_config(8).lr, 5e-4);

    let e = load("[override.training]\nlr_by_rank = { r8 = 5e-4 }")
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("x.toml") && e.contains("`r8` is not a rank"),
        "{e}"
    );
}

#[test]
fn a_judge_prompt_or_architecture_file_that_does_not_read_is_named_at_load() {
    let t = Tree::new();
    // The LLM judge's prompt: missing, then without a placeholder it needs.
    t.write(
        "configs/judges/j.toml",
        "kind = \"openai\"\nbase_url = \"http://localhost:8000/v1\"\nmodel = \"m\"\nprompt = \"judge.txt\"\n",
    );
    let e = t.experiment("").unwrap_err().to_string();
    assert!(e.contains("x.toml") && e.contains("judge.txt"), "{e}");
    t.write("configs/judges/judge.txt", "Q {question} A {answer}");
    let e = t.experiment("").unwrap_err().to_string();
    assert!(e.contains("judge.txt") && e.contains("{gold}"), "{e}");
    t.write(
        "configs/judges/judge.txt",
        "Q {question} G {gold} A {answer}",
    );
    t.experiment("").unwrap();
    // The model preset's architecture file: missing, then not a model config.
    t.write("configs/judges/j.toml", "kind = \"token-f1\"\n");
    t.write(
        "configs/models/m.toml",
        "source = \"some/model\"\narchitecture = \"arch.json\"\n",
    );
    let e = t.experiment("").unwrap_err().to_string();
    assert!(
        e.contains("model.architecture") && e.contains("arch.json"),
        "{e}"
    );
    t.write("configs/models/arch.json", "{\"hidden_size\": 8}");
    let e = t.experiment("").unwrap_err().to_string();
    assert!(e.contains("arch.json"), "{e}");
    std::fs::copy(
        repo().join("tests/fixtures/tiny-f32/config.json"),
        t.dir.path().join("configs/models/arch.json"),
    )
    .unwrap();
    t.experiment("").unwrap();
}
