//! Casting a backend tensor only where its dtype differs: what `Tensor::cast` does, and what
//! `B::float_cast` does not (under Burn's fusion it records a cast whatever the dtypes, a kernel
//! of its own where nothing fuses it).

use burn::backend::tensor::FloatTensor;
use burn::backend::{Backend, FloatDType, TensorMetadata};

/// `t` in `dtype`: `t` itself where it already is.
pub(crate) fn cast_to<B: Backend>(t: FloatTensor<B>, dtype: FloatDType) -> FloatTensor<B> {
    if FloatDType::from(t.dtype()) == dtype {
        t
    } else {
        B::float_cast(t, dtype)
    }
}
