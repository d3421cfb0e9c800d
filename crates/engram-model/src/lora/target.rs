//! The linear layers of a decoder block that can carry an adapter, by their HF module names
//! (`q_proj` … `down_proj`); written and read as those names in presets and adapter configs.

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::error::{ModelError, Result};

/// A linear layer of a decoder block that can carry an adapter (HF module names).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum LoraTarget {
    /// `self_attn.q_proj`.
    Q,
    /// `self_attn.k_proj`.
    K,
    /// `self_attn.v_proj`.
    V,
    /// `self_attn.o_proj`.
    O,
    /// `mlp.gate_proj`.
    Gate,
    /// `mlp.up_proj`.
    Up,
    /// `mlp.down_proj`.
    Down,
}

impl LoraTarget {
    /// Every adaptable linear layer, in HF's order.
    pub const ALL: [LoraTarget; 7] = [
        LoraTarget::Q,
        LoraTarget::K,
        LoraTarget::V,
        LoraTarget::O,
        LoraTarget::Gate,
        LoraTarget::Up,
        LoraTarget::Down,
    ];

    /// The module name PEFT uses in `target_modules` (`q_proj`...).
    pub fn name(self) -> &'static str {
        match self {
            LoraTarget::Q => "q_proj",
            LoraTarget::K => "k_proj",
            LoraTarget::V => "v_proj",
            LoraTarget::O => "o_proj",
            LoraTarget::Gate => "gate_proj",
            LoraTarget::Up => "up_proj",
            LoraTarget::Down => "down_proj",
        }
    }

    /// The path inside a decoder layer (`self_attn.q_proj`, `mlp.down_proj`...).
    pub fn path(self) -> &'static str {
        match self {
            LoraTarget::Q => "self_attn.q_proj",
            LoraTarget::K => "self_attn.k_proj",
            LoraTarget::V => "self_attn.v_proj",
            LoraTarget::O => "self_attn.o_proj",
            LoraTarget::Gate => "mlp.gate_proj",
            LoraTarget::Up => "mlp.up_proj",
            LoraTarget::Down => "mlp.down_proj",
        }
    }

    /// Parses a module name (`q_proj` or `self_attn.q_proj`); `None` for anything else
    /// (embeddings and `lm_head` are never adapted).
    pub fn parse(name: &str) -> Option<Self> {
        let short = name.rsplit('.').next().unwrap_or(name);
        Self::ALL.into_iter().find(|t| t.name() == short)
    }

    /// Parses a list of module names; the error names the first unknown one.
    pub fn parse_list<S: AsRef<str>>(names: &[S]) -> Result<Vec<Self>> {
        let mut out = Vec::new();
        for n in names {
            let t = Self::parse(n.as_ref()).ok_or_else(|| ModelError::BadLora(format!(
                "unknown target module `{}` (adaptable: q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj)",
                n.as_ref()
            )))?;
            if !out.contains(&t) {
                out.push(t);
            }
        }
        Ok(out)
    }
}

impl fmt::Display for LoraTarget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl Serialize for LoraTarget {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

impl<'de> Deserialize<'de> for LoraTarget {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        let name = String::deserialize(d)?;
        LoraTarget::parse_list(&[&name])
            .map(|t| t[0])
            .map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_parse_and_reject() {
        assert_eq!(
            LoraTarget::parse_list(&["q_proj", "mlp.down_proj", "q_proj"]).unwrap(),
            vec![LoraTarget::Q, LoraTarget::Down]
        );
        let e = LoraTarget::parse_list(&["lm_head"])
            .unwrap_err()
            .to_string();
        assert!(e.contains("`lm_head`"), "{e}");
    }

    #[test]
    fn targets_are_written_and_read_by_module_name() {
        let json = serde_json::to_string(&[LoraTarget::Q, LoraTarget::Down]).unwrap();
        assert_eq!(json, r#"["q_proj","down_proj"]"#);
        let back: Vec<LoraTarget> =
            serde_json::from_str(r#"["self_attn.q_proj", "down_proj"]"#).unwrap();
        assert_eq!(back, vec![LoraTarget::Q, LoraTarget::Down]);
        let e = serde_json::from_str::<Vec<LoraTarget>>(r#"["lm_head"]"#)
            .unwrap_err()
            .to_string();
        assert!(e.contains("`lm_head`") && e.contains("q_proj"), "{e}");
    }
}
