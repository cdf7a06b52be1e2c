//! Safe strided matrix views over flat slices and the one GEMM every layer uses.
//!
//! Views carry row and column strides, so transposes and per-head slices of a (B, T, C) buffer are
//! free: no copies, one call into the GEMM crate (runtime SIMD dispatch natively).

use crate::scalar::Scalar;

#[derive(Clone, Copy)]
pub struct MatRef<'a, S> {
    data: &'a [S],
    offset: usize,
    pub rows: usize,
    pub cols: usize,
    rs: usize,
    cs: usize,
}

pub struct MatMut<'a, S> {
    data: &'a mut [S],
    offset: usize,
    pub rows: usize,
    pub cols: usize,
    rs: usize,
    cs: usize,
}

fn last_index(offset: usize, rows: usize, cols: usize, rs: usize, cs: usize) -> usize {
    if rows == 0 || cols == 0 {
        offset
    } else {
        offset + (rows - 1) * rs + (cols - 1) * cs
    }
}

impl<'a, S: Scalar> MatRef<'a, S> {
    /// A row-major `rows x cols` matrix at the start of `data`.
    pub fn new(data: &'a [S], rows: usize, cols: usize) -> Self {
        Self::strided(data, 0, rows, cols, cols, 1)
    }

    /// A general view: element (i, j) is `data[offset + i * rs + j * cs]`.
    pub fn strided(data: &'a [S], offset: usize, rows: usize, cols: usize, rs: usize, cs: usize) -> Self {
        assert!(
            rows == 0 || cols == 0 || last_index(offset, rows, cols, rs, cs) < data.len(),
            "matrix view out of bounds"
        );
        MatRef { data, offset, rows, cols, rs, cs }
    }

    pub fn t(self) -> Self {
        MatRef { rows: self.cols, cols: self.rows, rs: self.cs, cs: self.rs, ..self }
    }

    pub fn at(&self, i: usize, j: usize) -> S {
        self.data[self.offset + i * self.rs + j * self.cs]
    }
}

impl<'a, S: Scalar> MatMut<'a, S> {
    pub fn new(data: &'a mut [S], rows: usize, cols: usize) -> Self {
        Self::strided(data, 0, rows, cols, cols, 1)
    }

    pub fn strided(data: &'a mut [S], offset: usize, rows: usize, cols: usize, rs: usize, cs: usize) -> Self {
        assert!(
            rows == 0 || cols == 0 || last_index(offset, rows, cols, rs, cs) < data.len(),
            "matrix view out of bounds"
        );
        MatMut { data, offset, rows, cols, rs, cs }
    }
}

/// `c = alpha * a b + beta * c`.
pub fn gemm<S: Scalar>(alpha: S, a: MatRef<S>, b: MatRef<S>, beta: S, c: MatMut<S>) {
    assert_eq!(a.cols, b.rows, "inner dimensions differ");
    assert_eq!((a.rows, b.cols), (c.rows, c.cols), "output shape differs");
    if c.rows == 0 || c.cols == 0 {
        return;
    }
    // SAFETY: every view was bounds-checked at construction; `c` is uniquely borrowed.
    unsafe {
        S::gemm_raw(
            a.rows,
            a.cols,
            b.cols,
            alpha,
            a.data.as_ptr().add(a.offset),
            a.rs as isize,
            a.cs as isize,
            b.data.as_ptr().add(b.offset),
            b.rs as isize,
            b.cs as isize,
            beta,
            c.data.as_mut_ptr().add(c.offset),
            c.rs as isize,
            c.cs as isize,
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strided_gemm_matches_naive_loop() {
        let (m, k, n) = (5, 7, 3);
        let a: Vec<f64> = (0..m * k).map(|i| (i as f64 * 0.37).sin()).collect();
        let b: Vec<f64> = (0..n * k).map(|i| (i as f64 * 0.11).cos()).collect();
        // b is stored n x k and used transposed.
        let mut c = vec![1.0; m * n];
        gemm(2.0, MatRef::new(&a, m, k), MatRef::new(&b, n, k).t(), 0.5, MatMut::new(&mut c, m, n));
        for i in 0..m {
            for j in 0..n {
                let want: f64 = 2.0 * (0..k).map(|p| a[i * k + p] * b[j * k + p]).sum::<f64>() + 0.5;
                assert!((c[i * n + j] - want).abs() < 1e-12);
            }
        }
    }
}
