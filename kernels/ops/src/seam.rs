//! The two seams every op shares, each written once:
//! - between an op's tensor-level function and its backends: [`on_dispatch!`] writes the function
//!   that hands its arguments to the op's backend extension trait on Burn's dispatch backend
//!   (which picks the CPU, CubeCL or autodiff implementation of the trait). A tensor argument is
//!   handed over as it is, a `&Tensor` as a clone (tables shared across layers), any other
//!   argument as its value ([`Handed`]);
//! - between an op's autodiff implementation and its inner backend: [`autodiff_node`] records the
//!   op as one node when a gradient is wanted and runs the inner backend's op when none is.

use burn::backend::Autodiff;
use burn::backend::Backend;
use burn::backend::autodiff::checkpoint::strategy::CheckpointStrategy;
use burn::backend::autodiff::ops::{Backward, OpsKind};
use burn::backend::tensor::FloatTensor;
use burn::tensor::kind::Basic;
use burn::tensor::{DispatchTensor, Tensor};

/// An op of `P` float inputs as one autodiff node. When some input is tracked, `tracked` computes
/// the output and the state `node`'s backward reads; otherwise `untracked` computes the output
/// alone (the inner backend's op, its kernel where it has one). `args` are the op's other
/// arguments, handed to whichever runs.
pub(crate) fn autodiff_node<C, B, N, A, const P: usize>(
    node: N,
    inputs: [FloatTensor<Autodiff<B, C>>; P],
    args: A,
    tracked: impl FnOnce([FloatTensor<B>; P], A) -> (N::State, FloatTensor<B>),
    untracked: impl FnOnce([FloatTensor<B>; P], A) -> FloatTensor<B>,
) -> FloatTensor<Autodiff<B, C>>
where
    C: CheckpointStrategy,
    B: Backend,
    N: Backward<B, P>,
{
    let prep = node.prepare::<C>(inputs.each_ref().map(|x| x.node()));
    let inputs = inputs.map(|x| x.into_primitive());
    match prep.compute_bound().stateful() {
        OpsKind::Tracked(prep) => {
            let (state, out) = tracked(inputs, args);
            prep.finish(state, out)
        }
        OpsKind::UnTracked(prep) => prep.finish(untracked(inputs, args)),
    }
}

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
