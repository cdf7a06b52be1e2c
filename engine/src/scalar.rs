//! The float type the model is written against: f32 for training, f64 for gradient checks.

use num_traits::{Float, FromPrimitive, NumAssign};

pub trait Scalar:
    Float + NumAssign + FromPrimitive + Default + Copy + Send + Sync + std::fmt::Debug + std::iter::Sum + 'static
{
    /// `C = alpha * A B + beta * C` on strided row/column views (see `matmul`).
    ///
    /// # Safety
    /// Pointers and strides must describe in-bounds m x k, k x n and m x n matrices.
    #[allow(clippy::too_many_arguments)]
    unsafe fn gemm_raw(
        m: usize,
        k: usize,
        n: usize,
        alpha: Self,
        a: *const Self,
        rsa: isize,
        csa: isize,
        b: *const Self,
        rsb: isize,
        csb: isize,
        beta: Self,
        c: *mut Self,
        rsc: isize,
        csc: isize,
    );

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

    unsafe fn gemm_raw(
        m: usize,
        k: usize,
        n: usize,
        alpha: f32,
        a: *const f32,
        rsa: isize,
        csa: isize,
        b: *const f32,
        rsb: isize,
        csb: isize,
        beta: f32,
        c: *mut f32,
        rsc: isize,
        csc: isize,
    ) {
        matrixmultiply::sgemm(m, k, n, alpha, a, rsa, csa, b, rsb, csb, beta, c, rsc, csc);
    }
}

impl Scalar for f64 {
    unsafe fn gemm_raw(
        m: usize,
        k: usize,
        n: usize,
        alpha: f64,
        a: *const f64,
        rsa: isize,
        csa: isize,
        b: *const f64,
        rsb: isize,
        csb: isize,
        beta: f64,
        c: *mut f64,
        rsc: isize,
        csc: isize,
    ) {
        matrixmultiply::dgemm(m, k, n, alpha, a, rsa, csa, b, rsb, csb, beta, c, rsc, csc);
    }
}
