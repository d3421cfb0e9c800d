//! One decoder block: pre-norm attention and pre-norm MLP, each with a residual connection.

use burn::module::Module;
use burn::tensor::{Bool, Tensor};

use crate::attention::Attention;
use crate::kv_cache::LayerCache;
use crate::mlp::Mlp;
use crate::norm::RmsNorm;

/// `LlamaDecoderLayer`.
#[derive(Module, Debug)]
pub struct DecoderLayer {
    /// `input_layernorm`.
    pub input_layernorm: RmsNorm,
    /// `self_attn`.
    pub self_attn: Attention,
    /// `post_attention_layernorm`.
    pub post_attention_layernorm: RmsNorm,
    /// `mlp`.
    pub mlp: Mlp,
}

impl DecoderLayer {
    /// Runs the block on `x: [1, batch · seq, hidden]`, the token rows of `batch` sequences.
    pub fn forward(
        &self,
        x: Tensor<3>,
        batch: usize,
        cos: &Tensor<4>,
        sin: &Tensor<4>,
        mask: Option<&Tensor<4, Bool>>,
        cache: Option<&mut LayerCache>,
    ) -> Tensor<3> {
        let h = x.clone()
            + self.self_attn.forward(
                self.input_layernorm.forward(x),
                batch,
                cos,
                sin,
                mask,
                cache,
            );
        h.clone() + self.mlp.forward(self.post_attention_layernorm.forward(h))
    }
}
