//! The one seam between an op's tensor-level function and its backends: [`on_dispatch!`] writes
//! the function that hands its arguments to the op's backend extension trait on Burn's dispatch
//! backend (which picks the CPU, CubeCL or autodiff implementation of the trait), so no op
//! restates that conversion. A tensor argument is handed over as it is, a `&Tensor` as a clone
//! (tables shared across layers), any other argument as its value ([`Handed`]).

use burn::tensor::kind::Basic;
use burn::tensor::{DispatchTensor, Tensor};

/// How an argument reaches a backend extension trait's method on the dispatch backend.
pub trait Handed {
    /// What the method takes.
    type Out;
    /// The argument as the method takes it.
    fn hand(self) -> Self::Out;
}

impl<const D: usize, K: Basic> Handed for Tensor<D, K> {
    type Out = DispatchTensor;
    fn hand(self) -> DispatchTensor {
        self.into_dispatch()
    }
}

impl<const D: usize, K: Basic> Handed for &Tensor<D, K> {
    type Out = DispatchTensor;
    fn hand(self) -> DispatchTensor {
        self.clone().into_dispatch()
    }
}

macro_rules! handed_as_is {
    ($($t:ty),*) => {$(
        impl Handed for $t {
            type Out = $t;
            fn hand(self) -> $t {
                self
            }
        }
    )*};
}
handed_as_is!(usize, f64);

/// `fn name(args) -> Tensor<..> => Op::method;` — a tensor-level op: its arguments handed
/// ([`Handed`]) to `<Dispatch as Op>::method`, and the tensor it returns.
macro_rules! on_dispatch {
    ($(#[$meta:meta])* $vis:vis fn $name:ident $(<const $c:ident: usize>)?
        ($($arg:ident: $ty:ty),* $(,)?) -> $ret:ty => $op:ident::$method:ident;) => {
        $(#[$meta])*
        $vis fn $name $(<const $c: usize>)? ($($arg: $ty),*) -> $ret {
            burn::tensor::Tensor::from_dispatch(<burn::backend::Dispatch as $op>::$method(
                $($crate::seam::Handed::hand($arg)),*
            ))
        }
    };
}
