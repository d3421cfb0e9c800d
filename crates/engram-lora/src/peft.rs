//! HF PEFT's adapter format: `adapter_model.safetensors` with keys
//! `base_model.model.model.layers.{i}.{self_attn|mlp}.{name}.lora_{A|B}.weight`
//! (`A: [r, in]`, `B: [out, r]`, f32) and `adapter_config.json`. engram keeps HF's q/k row order
//! (rotate-half RoPE), so factors need no permutation, only the transpose to Burn's `[in, out]`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use burn::module::Module;
use burn::tensor::{DType, Tensor, TensorData};
use engram_checkpoint::{FloatFormat, SafetensorsCheckpoint, TensorSource, encode_f32};
use engram_checkpoint::{LazyTensor, write_safetensors_lazily};
use engram_model::{Llama, LoraAdapter, LoraConfig, LoraTarget};
use serde_json::{Value, json};

use crate::error::{LoraError, Result};

/// The weights file of an adapter directory.
pub const ADAPTER_WEIGHTS: &str = "adapter_model.safetensors";
/// The config file of an adapter directory.
pub const ADAPTER_CONFIG: &str = "adapter_config.json";

/// The factors of one adapted layer in PEFT's orientation.
#[derive(Debug, Clone, PartialEq)]
pub struct PeftFactors {
    /// Block index.
    pub layer: usize,
    /// Module.
    pub target: LoraTarget,
    /// `lora_A.weight`, `[r, in]`, row-major.
    pub a: Vec<f32>,
    /// `lora_B.weight`, `[out, r]`, row-major.
    pub b: Vec<f32>,
    /// `r`.
    pub rank: usize,
    /// Input width.
    pub d_in: usize,
    /// Output width.
    pub d_out: usize,
}

/// An adapter read from (or about to be written to) a PEFT directory.
#[derive(Debug, Clone, PartialEq)]
pub struct PeftAdapter {
    /// Where it was read from.
    pub path: PathBuf,
    /// Rank, alpha, dropout, rsLoRA, targets, layers.
    pub config: LoraConfig,
    /// `base_model_name_or_path`.
    pub base_model: Option<String>,
    /// Factors by layer and module.
    pub factors: Vec<PeftFactors>,
}

fn key(layer: usize, target: LoraTarget, which: &str) -> String {
    format!(
        "base_model.model.model.layers.{layer}.{}.lora_{which}.weight",
        target.path()
    )
}

/// Row-major transpose of a `[rows, cols]` matrix.
fn transpose(v: &[f32], rows: usize, cols: usize) -> Vec<f32> {
    let mut out = vec![0.0; v.len()];
    for r in 0..rows {
        for c in 0..cols {
            out[c * rows + r] = v[r * cols + c];
        }
    }
    out
}

fn host_f32(t: Tensor<2>) -> Vec<f32> {
    t.cast(DType::F32)
        .into_data()
        .try_into_vec_as::<f32>()
        .expect("float tensor")
}

/// `adapter_config.json` as PEFT writes it (the keys PEFT's `LoraConfig` reads) for adapters of
/// `c` on `base_model`.
fn config_json(c: &LoraConfig, base_model: Option<&str>) -> Value {
    let mut targets: Vec<&str> = c.targets.iter().map(|t| t.name()).collect();
    targets.sort();
    let alpha = if c.alpha.fract() == 0.0 {
        json!(c.alpha as i64)
    } else {
        json!(c.alpha)
    };
    // A hub model named at a revision (`owner/name@rev`, as `--model` takes it): PEFT keeps the
    // two apart, and a repo id with `@` in it is not one the hub knows.
    let (base_model, revision) = match base_model.and_then(|b| b.split_once('@')) {
        Some((id, rev)) if engram_checkpoint::hub::looks_like_repo_id(id) && !rev.is_empty() => {
            (Some(id), Some(rev))
        }
        _ => (base_model, None),
    };
    json!({
        "peft_type": "LORA",
        "task_type": "CAUSAL_LM",
        "base_model_name_or_path": base_model,
        "r": c.rank,
        "lora_alpha": alpha,
        "lora_dropout": c.dropout,
        "target_modules": targets,
        "bias": "none",
        "use_rslora": c.use_rslora,
        "use_dora": false,
        "fan_in_fan_out": false,
        "init_lora_weights": true,
        "layers_to_transform": c.layers,
        "layers_pattern": null,
        "rank_pattern": {},
        "alpha_pattern": {},
        "modules_to_save": null,
        "inference_mode": true,
        "revision": revision,
    })
}

impl PeftAdapter {
    /// Reads the adapters attached to `model` into PEFT's layout.
    pub fn from_model(model: &Llama, config: &LoraConfig, base_model: Option<String>) -> Self {
        let factors = model
            .adapters()
            .into_iter()
            .map(|(layer, target, ad)| {
                let [d_in, rank] = ad.lora_a.shape().dims::<2>();
                let d_out = ad.lora_b.shape().dims::<2>()[1];
                PeftFactors {
                    layer,
                    target,
                    a: transpose(&host_f32(ad.lora_a.val()), d_in, rank),
                    b: transpose(&host_f32(ad.lora_b.val()), rank, d_out),
                    rank,
                    d_in,
                    d_out,
                }
            })
            .collect();
        Self {
            path: PathBuf::new(),
            config: config.clone(),
            base_model,
            factors,
        }
    }

    /// `adapter_config.json` as PEFT writes it (the keys PEFT's `LoraConfig` reads).
    pub fn config_json(&self) -> Value {
        config_json(&self.config, self.base_model.as_deref())
    }

    /// Writes `adapter_model.safetensors` and `adapter_config.json` into `dir` (created if
    /// needed), each atomically.
    pub fn save(&self, dir: &Path) -> Result<()> {
        let mut tensors = Vec::with_capacity(2 * self.factors.len());
        for f in &self.factors {
            for (which, shape, values) in [
                ("A", [f.rank, f.d_in], &f.a),
                ("B", [f.d_out, f.rank], &f.b),
            ] {
                let bytes = Box::new(move || encode_f32(values, FloatFormat::F32));
                tensors.push((key(f.layer, f.target, which), f32_tensor(shape, bytes)));
            }
        }
        write_dir(dir, tensors, &self.config, self.base_model.as_deref())
    }

    /// Attaches these factors to `model` (base frozen, any adapters already attached replaced),
    /// checking every shape against the model.
    pub fn apply(&self, model: Llama) -> Result<Llama> {
        let device = model.device();
        let mut model = model.without_lora().no_grad();
        let layers = model.layers.len();
        for f in &self.factors {
            if f.layer >= layers {
                return Err(LoraError::adapter(
                    &self.path,
                    format!(
                        "{} adapts layer {}, but the model has {layers} layers",
                        key(f.layer, f.target, "A"),
                        f.layer
                    ),
                ));
            }
            let lin = model.linear_mut(f.layer, f.target);
            if (lin.d_in(), lin.d_out()) != (f.d_in, f.d_out) {
                return Err(LoraError::adapter(
                    &self.path,
                    format!(
                        "{}: adapter is for a {}→{} layer, the model's is {}→{} (made for another base model?)",
                        key(f.layer, f.target, "A"),
                        f.d_in,
                        f.d_out,
                        lin.d_in(),
                        lin.d_out()
                    ),
                ));
            }
            let a = Tensor::from_data(
                TensorData::new(transpose(&f.a, f.rank, f.d_in), [f.d_in, f.rank]),
                (&device, DType::F32),
            );
            let b = Tensor::from_data(
                TensorData::new(transpose(&f.b, f.d_out, f.rank), [f.rank, f.d_out]),
                (&device, DType::F32),
            );
            let name = Llama::linear_name(f.layer, f.target);
            lin.lora = Some(LoraAdapter::from_factors(
                &name,
                a,
                b,
                self.config.scaling(),
                self.config.dropout,
            ));
        }
        Ok(model)
    }
}

/// Writes the adapters attached to `model` as a PEFT directory (`dir`, created if needed), each
/// file atomically; factors go from the device to the file one at a time, so no host copy of the
/// whole adapter is made.
pub fn save_adapter(
    model: &Llama,
    config: &LoraConfig,
    base_model: Option<String>,
    dir: &Path,
) -> Result<()> {
    let adapters = model.adapters();
    let mut tensors = Vec::with_capacity(2 * adapters.len());
    for (layer, target, ad) in adapters {
        for (which, p) in [("A", &ad.lora_a), ("B", &ad.lora_b)] {
            // PEFT's orientation: Burn's [in, out] factor transposed on the device.
            tensors.push((key(layer, target, which), streamed(p.val().transpose())));
        }
    }
    write_dir(dir, tensors, config, base_model.as_deref())
}

/// An f32 tensor of `shape` whose bytes `bytes` produces when the writer reaches it.
fn f32_tensor<'a>(shape: [usize; 2], bytes: Box<dyn Fn() -> Vec<u8> + 'a>) -> LazyTensor<'a> {
    LazyTensor {
        shape: shape.to_vec(),
        format: FloatFormat::F32,
        bytes,
    }
}

/// An f32 file tensor read from the device tensor `t` only when the writer reaches it.
pub(crate) fn streamed(t: Tensor<2>) -> LazyTensor<'static> {
    let shape = t.dims();
    f32_tensor(
        shape,
        Box::new(move || encode_f32(&host_f32(t.clone()), FloatFormat::F32)),
    )
}

/// Writes an adapter directory: `tensors` to `adapter_model.safetensors` one at a time, then
/// `adapter_config.json` for `config` on `base_model` (created if needed, each file atomically).
fn write_dir(
    dir: &Path,
    tensors: Vec<(String, LazyTensor<'_>)>,
    config: &LoraConfig,
    base_model: Option<&str>,
) -> Result<()> {
    std::fs::create_dir_all(dir).map_err(LoraError::io(dir))?;
    write_safetensors_lazily(&dir.join(ADAPTER_WEIGHTS), tensors)?;
    let json = serde_json::to_vec_pretty(&config_json(config, base_model)).expect("json");
    Ok(engram_io::write_file(&dir.join(ADAPTER_CONFIG), &json)?)
}

fn config_value<'a>(cfg: &'a Value, key: &str) -> Option<&'a Value> {
    cfg.get(key).filter(|v| !v.is_null())
}

fn parse_config(path: &Path, cfg: &Value) -> Result<(LoraConfig, Option<String>)> {
    let bad = |m: String| LoraError::adapter(path, m);
    match cfg.get("peft_type").and_then(Value::as_str) {
        Some("LORA") | None => {}
        Some(other) => return Err(bad(format!("peft_type `{other}` is not LORA"))),
    }
    // A key present with another type than PEFT writes is an error naming it: a silent default
    // (`lora_alpha: "16"` read as 8) would change the adapter's arithmetic.
    let typed = |key: &str, kind: Kind| -> Result<Option<&Value>> {
        match config_value(cfg, key) {
            None => Ok(None),
            Some(v) if kind.holds(v) => Ok(Some(v)),
            Some(v) => Err(bad(format!("`{key}` is {v}, not {}", kind.name()))),
        }
    };
    let rank = typed("r", Kind::Count)?
        .and_then(Value::as_u64)
        .ok_or_else(|| bad("`r` missing".into()))? as usize;
    let alpha = typed("lora_alpha", Kind::Number)?
        .and_then(Value::as_f64)
        .unwrap_or(8.0);
    let dropout = typed("lora_dropout", Kind::Number)?
        .and_then(Value::as_f64)
        .unwrap_or(0.0);
    let use_rslora = typed("use_rslora", Kind::Bool)?
        .and_then(Value::as_bool)
        .unwrap_or(false);
    if typed("use_dora", Kind::Bool)?.and_then(Value::as_bool) == Some(true) {
        return Err(bad(
            "DoRA adapters (`use_dora: true`) are not supported".into()
        ));
    }
    if typed("use_qalora", Kind::Bool)?.and_then(Value::as_bool) == Some(true) {
        return Err(bad(
            "QA-LoRA adapters (`use_qalora: true`) are not supported".into(),
        ));
    }
    for k in ["rank_pattern", "alpha_pattern"] {
        if typed(k, Kind::Object)?.is_some_and(|v| v.as_object().is_some_and(|o| !o.is_empty())) {
            return Err(bad(format!("per-module `{k}` is not supported")));
        }
    }
    if let Some(b) = typed("bias", Kind::Text)?.and_then(Value::as_str)
        && b != "none"
    {
        return Err(bad(format!("bias `{b}` is not supported (only \"none\")")));
    }
    if typed("modules_to_save", Kind::List)?
        .is_some_and(|m| m.as_array().is_some_and(|a| !a.is_empty()))
    {
        return Err(bad("`modules_to_save` is not supported".into()));
    }
    // Initialisations that change the base model too (its weights become the residual the
    // adapter was fitted to), unless PEFT converted the adapter back to plain LoRA on saving.
    if let Some(init) = typed("init_lora_weights", Kind::BoolOrText)?.and_then(Value::as_str)
        && ["pissa", "olora", "corda", "loftq"]
            .iter()
            .any(|m| init.starts_with(m))
    {
        return Err(bad(format!(
            "`init_lora_weights: \"{init}\"` adapters expect a base model changed by that \
             initialisation; save them with PEFT's conversion to plain LoRA \
             (path_initial_model_for_weight_conversion)"
        )));
    }
    // Settings that place the adapter where engram would not (a replicated layer stack), add
    // trainable weights beside the factors, or make it another kind of adapter (activated,
    // routed, block-diagonal, SVD-truncated, …): refused while set, whatever engram does not
    // know being better named than guessed (PEFT 0.21 writes them null, false or empty).
    for k in [
        "layer_replication",
        "target_parameters",
        "trainable_token_indices",
        "alora_invocation_tokens",
        "arrow_config",
        "kasa_config",
        "monteclora_config",
        "use_bdlora",
        "velora_config",
    ] {
        let set = config_value(cfg, k).is_some_and(|v| match v {
            Value::Array(a) => !a.is_empty(),
            Value::Object(o) => !o.is_empty(),
            Value::Bool(b) => *b,
            _ => true,
        });
        if set {
            return Err(bad(format!("`{k}` is not supported")));
        }
    }
    let targets: Vec<String> = match config_value(cfg, "target_modules") {
        Some(Value::Array(a)) => a
            .iter()
            .map(|v| v.as_str().unwrap_or_default().to_string())
            .collect(),
        Some(Value::String(s)) if s == "all-linear" => LoraTarget::ALL
            .iter()
            .map(|t| t.name().to_string())
            .collect(),
        Some(Value::String(s)) => vec![s.clone()],
        _ => return Err(bad("`target_modules` missing".into())),
    };
    let targets = LoraTarget::parse_list(&targets).map_err(|e| bad(e.to_string()))?;
    let layers = match config_value(cfg, "layers_to_transform") {
        None => None,
        Some(Value::Number(n)) => Some(vec![n.as_u64().unwrap_or(0) as usize]),
        Some(Value::Array(a)) => Some(
            a.iter()
                .map(|v| v.as_u64().map(|x| x as usize))
                .collect::<Option<Vec<_>>>()
                .ok_or_else(|| bad("`layers_to_transform` must list integers".into()))?,
        ),
        Some(other) => return Err(bad(format!("`layers_to_transform` {other} is not a list"))),
    };
    // Read back as `--model` names it: a revision PEFT keeps apart joins its repo id
    // (`owner/name@rev`), so an adapter read and written again keeps it.
    let revision = config_value(cfg, "revision")
        .and_then(Value::as_str)
        .filter(|r| !r.is_empty());
    let base = config_value(cfg, "base_model_name_or_path")
        .and_then(Value::as_str)
        .map(|b| match revision {
            Some(r) if !b.contains('@') => format!("{b}@{r}"),
            _ => b.to_string(),
        });
    let config = LoraConfig::new(rank)
        .with_alpha(alpha)
        .with_dropout(dropout)
        .with_rslora(use_rslora)
        .with_targets(targets)
        .with_layers(layers);
    // r 0 (a scaling of alpha / 0), a dropout outside [0, 1), a non-positive alpha.
    config.validate_values().map_err(|e| bad(e.to_string()))?;
    Ok((config, base))
}

/// The kinds of value an adapter config's keys hold.
#[derive(Clone, Copy)]
enum Kind {
    Count,
    Number,
    Bool,
    Object,
    Text,
    List,
    BoolOrText,
}

impl Kind {
    /// Whether `v` is of this kind.
    fn holds(self, v: &Value) -> bool {
        match self {
            Kind::Count => v.is_u64(),
            Kind::Number => v.is_number(),
            Kind::Bool => v.is_boolean(),
            Kind::Object => v.is_object(),
            Kind::Text => v.is_string(),
            Kind::List => v.is_array(),
            Kind::BoolOrText => v.is_boolean() || v.is_string(),
        }
    }

    /// What an error calls it.
    fn name(self) -> &'static str {
        match self {
            Kind::Count => "a whole number",
            Kind::Number => "a number",
            Kind::Bool => "true or false",
            Kind::Object => "an object",
            Kind::Text => "a string",
            Kind::List => "a list",
            Kind::BoolOrText => "true, false or a method name",
        }
    }
}

/// A factor's shape and values.
type Factor = (Vec<usize>, Vec<f32>);
/// `lora_A` and `lora_B` of one layer as they are found in the file.
type FactorPair = (Option<Factor>, Option<Factor>);

/// Parses `base_model.model.model.layers.{i}.{path}.lora_{A|B}[.default].weight`.
fn parse_key(k: &str) -> Option<(usize, LoraTarget, char)> {
    let rest = k.strip_prefix("base_model.model.")?;
    let rest = rest.strip_prefix("model.layers.")?;
    let (layer, rest) = rest.split_once('.')?;
    let layer: usize = layer.parse().ok()?;
    let rest = rest.strip_suffix(".weight")?.trim_end_matches(".default");
    let (module, which) = rest.rsplit_once(".lora_")?;
    let target = LoraTarget::ALL.into_iter().find(|t| t.path() == module)?;
    let which = match which {
        "A" => 'A',
        "B" => 'B',
        _ => return None,
    };
    Some((layer, target, which))
}

/// Reads a PEFT adapter directory (made by engram or by PEFT).
pub fn load_adapter(dir: &Path) -> Result<PeftAdapter> {
    let cfg_path = dir.join(ADAPTER_CONFIG);
    let text = std::fs::read_to_string(&cfg_path).map_err(LoraError::io(&cfg_path))?;
    let cfg: Value = serde_json::from_str(&text)
        .map_err(|e| LoraError::adapter(&cfg_path, format!("not JSON: {e}")))?;
    let (config, base_model) = parse_config(&cfg_path, &cfg)?;
    let weights = dir.join(ADAPTER_WEIGHTS);
    if !weights.exists() {
        return Err(LoraError::adapter(
            &weights,
            "missing (adapter_model.bin is not supported)",
        ));
    }
    let src = SafetensorsCheckpoint::open_files(weights.clone(), vec![weights.clone()])?;
    let mut pairs: BTreeMap<(usize, LoraTarget), FactorPair> = BTreeMap::new();
    for name in src.names() {
        let (layer, target, which) = parse_key(&name).ok_or_else(|| {
            LoraError::adapter(
                &weights,
                format!(
                    "unexpected tensor `{name}` (not a LoRA A/B factor of a decoder linear layer)"
                ),
            )
        })?;
        let t = src.read(&name)?;
        if t.shape.len() != 2 {
            return Err(LoraError::adapter(
                &weights,
                format!("{name} has shape {:?}, expected a matrix", t.shape),
            ));
        }
        let entry = pairs.entry((layer, target)).or_default();
        let slot = if which == 'A' {
            &mut entry.0
        } else {
            &mut entry.1
        };
        let values = t.to_f32();
        // A factor holding NaN or ±inf is named here, where a resumed or merged run would
        // only report a diverged loss or a broken model.
        if let Some(at) = values.iter().position(|v| !v.is_finite()) {
            return Err(LoraError::adapter(
                &weights,
                format!("{name} holds {} at index {at}", values[at]),
            ));
        }
        *slot = Some((t.shape.clone(), values));
    }
    if pairs.is_empty() {
        return Err(LoraError::adapter(&weights, "holds no LoRA factors"));
    }
    let mut factors = Vec::new();
    for ((layer, target), (a, b)) in pairs {
        let (Some((sa, a)), Some((sb, b))) = (a, b) else {
            return Err(LoraError::adapter(
                &weights,
                format!("layer {layer} {target}: lora_A and lora_B must both be present"),
            ));
        };
        if sa[0] != config.rank || sb[1] != config.rank {
            return Err(LoraError::adapter(
                &weights,
                format!(
                    "{}: shapes A {sa:?} / B {sb:?} disagree with r = {} in {ADAPTER_CONFIG}",
                    key(layer, target, "A"),
                    config.rank
                ),
            ));
        }
        factors.push(PeftFactors {
            layer,
            target,
            a,
            b,
            rank: config.rank,
            d_in: sa[1],
            d_out: sb[0],
        });
    }
    Ok(PeftAdapter {
        path: dir.to_path_buf(),
        config,
        base_model,
        factors,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_parse() {
        assert_eq!(
            parse_key("base_model.model.model.layers.12.mlp.down_proj.lora_B.weight"),
            Some((12, LoraTarget::Down, 'B'))
        );
        assert_eq!(
            parse_key("base_model.model.model.layers.0.self_attn.q_proj.lora_A.default.weight"),
            Some((0, LoraTarget::Q, 'A'))
        );
        assert_eq!(parse_key("base_model.model.lm_head.lora_A.weight"), None);
        assert_eq!(
            parse_key(&key(3, LoraTarget::K, "A")),
            Some((3, LoraTarget::K, 'A'))
        );
    }

    /// A hub model at a revision is written as PEFT writes it: the repo id, and the revision
    /// apart (`owner/name@rev` is no repo id, and PEFT would load the default branch).
    #[test]
    fn a_revision_of_the_base_model_is_its_own_key() {
        let c = LoraConfig::new(8);
        let v = config_json(&c, Some("meta-llama/Llama-3.1-8B-Instruct@0e9e39f"));
        assert_eq!(
            v["base_model_name_or_path"],
            "meta-llama/Llama-3.1-8B-Instruct"
        );
        assert_eq!(v["revision"], "0e9e39f");
        let (_, base) = parse_config(Path::new("adapter_config.json"), &v).unwrap();
        assert_eq!(
            base.as_deref(),
            Some("meta-llama/Llama-3.1-8B-Instruct@0e9e39f"),
            "read back as written"
        );
        for plain in ["meta-llama/Llama-3.1-8B-Instruct", "/models/llama"] {
            let v = config_json(&c, Some(plain));
            assert_eq!(v["base_model_name_or_path"], plain);
            assert!(v["revision"].is_null());
        }
    }

    #[test]
    fn a_config_that_would_change_the_math_unseen_is_refused_by_its_key() {
        let path = Path::new("adapter/adapter_config.json");
        let parse = |extra: Value| {
            let mut cfg = serde_json::json!({
                "peft_type": "LORA", "r": 8, "lora_alpha": 32, "lora_dropout": 0.05,
                "target_modules": ["q_proj", "v_proj"], "bias": "none",
                "init_lora_weights": true, "layer_replication": null,
            });
            cfg.as_object_mut()
                .unwrap()
                .extend(extra.as_object().unwrap().clone());
            parse_config(path, &cfg).map_err(|e| e.to_string())
        };
        let (ok, _) = parse(serde_json::json!({})).unwrap();
        assert_eq!((ok.rank, ok.alpha), (8, 32.0));
        // PEFT's own empty and default values pass.
        assert!(parse(serde_json::json!({"rank_pattern": {}, "use_dora": false, "init_lora_weights": "gaussian", "target_parameters": null})).is_ok());
        for (extra, named) in [
            (serde_json::json!({"r": 0}), "rank"),
            (serde_json::json!({"r": "8"}), "`r`"),
            (serde_json::json!({"lora_alpha": "16"}), "`lora_alpha`"),
            (serde_json::json!({"lora_dropout": 1.5}), "dropout"),
            (serde_json::json!({"use_rslora": "true"}), "`use_rslora`"),
            (serde_json::json!({"use_qalora": true}), "use_qalora"),
            (
                serde_json::json!({"init_lora_weights": "pissa_niter_4"}),
                "pissa",
            ),
            (serde_json::json!({"init_lora_weights": "loftq"}), "loftq"),
            (
                serde_json::json!({"layer_replication": [[0, 2], [1, 3]]}),
                "layer_replication",
            ),
            (
                serde_json::json!({"trainable_token_indices": [5]}),
                "trainable_token_indices",
            ),
            (serde_json::json!({"bias": 1}), "`bias`"),
        ] {
            let e = parse(extra.clone()).unwrap_err();
            assert!(
                e.contains(named) && e.contains("adapter_config.json"),
                "{extra}: {e}"
            );
        }
    }

    #[test]
    fn transpose_round_trips() {
        let v: Vec<f32> = (0..12).map(|x| x as f32).collect();
        let t = transpose(&v, 3, 4);
        assert_eq!(t[1], 4.0);
        assert_eq!(transpose(&t, 4, 3), v);
    }
}
