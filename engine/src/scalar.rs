//! The float type the model is written against: f32 for training, f64 for gradient checks.

use num_traits::{Float, FromPrimitive, NumAssign};

pub trait Scalar:
    Float + NumAssign + FromPrimitive + Default + Copy + Send + Sync + std::fmt::Debug + std::iter::Sum + 'static
{
    /// `exp` for the hot loops (softmax, GELU): f32 takes `nn::exp::exp`, which vectorises and
    /// is within 1 ulp; f64 (the gradient checks) keeps libm's.
    fn exp_fast(self) -> Self {
        self.exp()
    }

    fn of(x: f64) -> Self {
        Self::from_f64(x).expect("finite f64 converts")
    }
}

impl Scalar for f32 {
    fn exp_fast(self) -> f32 {
        crate::nn::exp::exp(self)
    }
}

impl Scalar for f64 {}
