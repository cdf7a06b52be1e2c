//! The float type the model is written against: f32 for training, f64 for gradient checks.

use num_traits::{Float, FromPrimitive, NumAssign};

pub trait Scalar:
    Float + NumAssign + FromPrimitive + Default + Copy + Send + Sync + std::fmt::Debug + std::iter::Sum + 'static
{
    /// `C = alpha * A B + beta * C` on strided row/column views (see `nn::matmul`); with `beta` = 0,
    /// C is not read.
    ///
    /// # Safety
    /// Pointers and strides must describe in-bounds m x k, k x n and m x n matrices, C's elements
    /// distinct and not aliased by A or B.
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

    /// The standard normal CDF Φ (exact GELU's): f32 takes `nn::normal_cdf`, which vectorises;
    /// f64 (the gradient checks) keeps libm's erf.
    fn normal_cdf(self) -> Self {
        let x = self.to_f64().unwrap_or(f64::NAN);
        Self::of(0.5 * (1.0 + libm::erf(x * std::f64::consts::FRAC_1_SQRT_2)))
    }

    fn of(x: f64) -> Self {
        Self::from_f64(x).expect("finite f64 converts")
    }
}

/// The GEMM each float type uses: the `gemm` crate natively (its AVX-512 or AVX2 kernels, chosen
/// at run time), matrixmultiply's SIMD128 kernels in wasm32 (measured faster there at the page's
/// sizes, the same at the larger ones).
macro_rules! gemm_raw {
    ($t:ty, $mm:ident) => {
        unsafe fn gemm_raw(
            m: usize,
            k: usize,
            n: usize,
            alpha: $t,
            a: *const $t,
            rsa: isize,
            csa: isize,
            b: *const $t,
            rsb: isize,
            csb: isize,
            beta: $t,
            c: *mut $t,
            rsc: isize,
            csc: isize,
        ) {
            #[cfg(not(target_arch = "wasm32"))]
            // SAFETY: the caller's contract. The crate's convention: dst = alpha dst + beta lhs rhs,
            // columns before rows. One thread: the shards are the parallelism, and a product's bits
            // must not depend on the thread count.
            unsafe {
                gemm::gemm(
                    m,
                    n,
                    k,
                    c,
                    csc,
                    rsc,
                    beta != 0.0,
                    a,
                    csa,
                    rsa,
                    b,
                    csb,
                    rsb,
                    beta,
                    alpha,
                    false,
                    false,
                    false,
                    gemm::Parallelism::None,
                );
            }
            #[cfg(target_arch = "wasm32")]
            // SAFETY: the caller's contract.
            unsafe {
                matrixmultiply::$mm(m, k, n, alpha, a, rsa, csa, b, rsb, csb, beta, c, rsc, csc);
            }
        }
    };
}

impl Scalar for f32 {
    gemm_raw!(f32, sgemm);

    fn exp_fast(self) -> f32 {
        crate::nn::exp::exp(self)
    }

    fn normal_cdf(self) -> f32 {
        crate::nn::normal_cdf::normal_cdf(self)
    }
}

impl Scalar for f64 {
    gemm_raw!(f64, dgemm);
}
