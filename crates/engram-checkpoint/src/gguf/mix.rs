//! GGUF file types: which GGML type each weight of a llama-architecture model is stored as, by
//! llama.cpp's rules (`llama-quantize`'s `--type`, `llama_tensor_get_type` in
//! `src/llama-quant.cpp`), so that a file engram writes as `Q4_K_M` holds what llama.cpp's own
//! `Q4_K_M` of the same model holds.

use engram_kernels::BlockFormat;

use super::dequant::GgmlType;

/// A GGUF file type engram writes.
#[allow(non_camel_case_types)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GgufMix {
    /// Every weight matrix F16.
    F16,
    /// Every weight matrix Q8_0.
    Q8_0,
    /// Q4_K, with Q6_K for the output (or tied embedding) matrix, for the value projection and
    /// the FFN down projection of the layers llama.cpp gives more bits (the first and last
    /// eighth, and every third between), and the 32-weight Q5_0 / Q8_0 for matrices whose rows
    /// are not whole 256-weight super-blocks.
    Q4_K_M,
}

/// What [`GgufMix::tensor_type`] needs to know of the model.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MixModel {
    /// Transformer blocks.
    pub layers: usize,
    /// Attention heads.
    pub heads: usize,
    /// Key/value heads.
    pub kv_heads: usize,
    /// Whether the output projection is the token embedding (no `output.weight`).
    pub tied: bool,
}

impl GgufMix {
    /// Every file type engram writes.
    pub const ALL: [GgufMix; 3] = [GgufMix::F16, GgufMix::Q8_0, GgufMix::Q4_K_M];

    /// The name llama.cpp gives it.
    pub fn name(self) -> &'static str {
        match self {
            GgufMix::F16 => "F16",
            GgufMix::Q8_0 => "Q8_0",
            GgufMix::Q4_K_M => "Q4_K_M",
        }
    }

    /// The file type by name (any case), or an error naming the ones engram writes.
    pub fn parse(name: &str) -> Result<Self, String> {
        Self::ALL
            .into_iter()
            .find(|m| m.name().eq_ignore_ascii_case(name))
            .ok_or_else(|| {
                let can: Vec<&str> = Self::ALL.iter().map(|m| m.name()).collect();
                format!(
                    "GGUF type {name:?} is not one engram writes; it writes {}",
                    can.join(", ")
                )
            })
    }

    /// `general.file_type` (llama.cpp's `llama_ftype`).
    pub fn file_type(self) -> u32 {
        match self {
            GgufMix::F16 => 1,
            GgufMix::Q8_0 => 7,
            GgufMix::Q4_K_M => 15,
        }
    }

    /// The type tensor `name` (GGUF dims `ne`, fastest first) is stored as, or `None` for a
    /// tensor the file type leaves as it is (vectors such as the norms).
    pub fn tensor_type(self, name: &str, ne: &[u64], model: &MixModel) -> Option<GgmlType> {
        if ne.len() < 2 || !name.ends_with("weight") || name.contains("_norm.weight") {
            return None;
        }
        let block = |f| GgmlType::Block(f);
        let chosen = match self {
            GgufMix::F16 => return Some(GgmlType::F16),
            GgufMix::Q8_0 => BlockFormat::Q8_0,
            GgufMix::Q4_K_M => q4_k_m(name, ne[0], model),
        };
        Some(fallback(block(chosen), ne[0]))
    }
}

/// `Q4_K_M`'s choice for one tensor, before the shape fallback.
fn q4_k_m(name: &str, ne0: u64, model: &MixModel) -> BlockFormat {
    let layer = name
        .strip_prefix("blk.")
        .and_then(|r| r.split('.').next())
        .and_then(|n| n.parse::<usize>().ok());
    let more_bits = |i: usize| {
        let n = model.layers;
        i < n / 8 || i >= 7 * n / 8 || (i as i64 - (n / 8) as i64).rem_euclid(3) == 2
    };
    if name == "output.weight" || (model.tied && name == "token_embd.weight") {
        return if ne0.is_multiple_of(256) {
            BlockFormat::Q6_K
        } else {
            BlockFormat::Q8_0
        };
    }
    if name.contains("attn_v.weight") {
        // llama.cpp's 70B (80 layers, grouped-query attention) gives its small V matrices Q5_K.
        let seventy_b = model.layers == 80 && model.heads != model.kv_heads;
        return match layer {
            Some(i) if more_bits(i) => BlockFormat::Q6_K,
            _ if seventy_b => BlockFormat::Q5_K,
            _ => BlockFormat::Q4_K,
        };
    }
    if name.contains("ffn_down")
        && let Some(i) = layer
        && more_bits(i)
    {
        return BlockFormat::Q6_K;
    }
    BlockFormat::Q4_K
}

/// llama.cpp's fallback for a row length that is not a whole number of the type's blocks:
/// the K-quants to a 32-weight format (Q4_K → Q5_0, Q5_K → Q5_1, Q6_K → Q8_0), and F16 when even
/// that does not fit.
fn fallback(ty: GgmlType, ne0: u64) -> GgmlType {
    let fits = |t: GgmlType| ne0.is_multiple_of(t.block_elems() as u64);
    if fits(ty) {
        return ty;
    }
    let next = match ty {
        GgmlType::Block(BlockFormat::Q4_K) => GgmlType::Block(BlockFormat::Q5_0),
        GgmlType::Block(BlockFormat::Q5_K) => GgmlType::Block(BlockFormat::Q5_1),
        GgmlType::Block(BlockFormat::Q6_K) => GgmlType::Block(BlockFormat::Q8_0),
        _ => GgmlType::F16,
    };
    if fits(next) { next } else { GgmlType::F16 }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn name_of(m: GgufMix, t: &str, ne: &[u64], model: &MixModel) -> &'static str {
        m.tensor_type(t, ne, model).map_or("kept", |t| t.name())
    }

    /// Llama-3.1-8B's Q4_K_M as llama.cpp makes it (32 layers; 4096 wide, 14336 FFN): V and
    /// FFN-down get Q6_K in layers 0–3, 28–31 and every third layer from 6, the output Q6_K,
    /// the rest Q4_K; the norms are left alone.
    #[test]
    fn q4_k_m_follows_llama_cpp_on_llama_8b() {
        let m = MixModel {
            layers: 32,
            heads: 32,
            kv_heads: 8,
            tied: false,
        };
        let q = GgufMix::Q4_K_M;
        let six: Vec<usize> = (0..32)
            .filter(|i| name_of(q, &format!("blk.{i}.attn_v.weight"), &[4096, 1024], &m) == "Q6_K")
            .collect();
        assert_eq!(
            six,
            [0, 1, 2, 3, 6, 9, 12, 15, 18, 21, 24, 27, 28, 29, 30, 31]
        );
        assert_eq!(
            name_of(q, "blk.5.ffn_down.weight", &[14336, 4096], &m),
            "Q4_K"
        );
        assert_eq!(
            name_of(q, "blk.6.ffn_down.weight", &[14336, 4096], &m),
            "Q6_K"
        );
        assert_eq!(name_of(q, "blk.6.attn_q.weight", &[4096, 4096], &m), "Q4_K");
        assert_eq!(name_of(q, "output.weight", &[4096, 128256], &m), "Q6_K");
        assert_eq!(name_of(q, "token_embd.weight", &[4096, 128256], &m), "Q4_K");
        assert_eq!(name_of(q, "blk.0.attn_norm.weight", &[4096], &m), "kept");
        assert_eq!(name_of(q, "rope_freqs.weight", &[64], &m), "kept");
    }

    /// SmolLM2-135M (576 wide, 1536 FFN, tied): 576-wide rows fall back to 32-weight blocks.
    #[test]
    fn rows_that_are_not_super_blocks_fall_back_as_in_llama_cpp() {
        let m = MixModel {
            layers: 30,
            heads: 9,
            kv_heads: 3,
            tied: true,
        };
        let q = GgufMix::Q4_K_M;
        assert_eq!(name_of(q, "blk.4.attn_q.weight", &[576, 576], &m), "Q5_0");
        assert_eq!(name_of(q, "blk.0.attn_v.weight", &[576, 192], &m), "Q8_0");
        assert_eq!(
            name_of(q, "blk.4.ffn_down.weight", &[1536, 576], &m),
            "Q4_K"
        );
        assert_eq!(
            name_of(q, "blk.5.ffn_down.weight", &[1536, 576], &m),
            "Q6_K"
        );
        assert_eq!(name_of(q, "token_embd.weight", &[576, 49152], &m), "Q8_0");
        assert_eq!(
            name_of(GgufMix::Q8_0, "blk.1.ffn_up.weight", &[576, 1536], &m),
            "Q8_0"
        );
        assert_eq!(name_of(GgufMix::Q8_0, "odd.weight", &[100, 3], &m), "F16");
        assert_eq!(
            name_of(GgufMix::F16, "blk.1.ffn_up.weight", &[576, 1536], &m),
            "F16"
        );
    }

    #[test]
    fn a_type_engram_cannot_write_is_named_with_those_it_can() {
        assert_eq!(GgufMix::parse("q4_k_m"), Ok(GgufMix::Q4_K_M));
        let e = GgufMix::parse("Q3_K_S").unwrap_err();
        assert!(
            e.contains("Q3_K_S") && e.contains("F16, Q8_0, Q4_K_M"),
            "{e}"
        );
    }
}
