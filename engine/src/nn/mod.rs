//! The layers as forward/backward pairs on flat row-major slices (llm.c style, shapes in each
//! function's comment), the GEMM they share and the sums they vectorise (`reduce`). The model is
//! written from these.

pub mod activation;
pub mod attention;
pub mod bf16;
pub mod embedding;
pub mod exp;
pub mod layer_norm;
pub mod linear;
pub mod loss;
pub mod matmul;
pub mod normal_cdf;
pub mod reduce;
pub mod rotary;
