//! Safe strided matrix views over flat slices and the one GEMM every layer uses.
//!
//! Views carry row and column strides, so transposes and per-head slices of a (B, T, C) buffer are
//! free: no copies, one call into a GEMM crate (`Scalar::gemm_raw`: the `gemm` crate natively,
//! matrixmultiply in the browser).

use std::ops::Range;

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

/// The largest index a non-empty view touches, or None when it overflows (or a stride does not fit
/// the GEMM's `isize`): such a view is refused, so safe code never reaches the unsafe GEMM with it.
fn last_index(offset: usize, rows: usize, cols: usize, rs: usize, cs: usize) -> Option<usize> {
    isize::try_from(rs).ok()?;
    isize::try_from(cs).ok()?;
    (rows - 1).checked_mul(rs)?.checked_add((cols - 1).checked_mul(cs)?)?.checked_add(offset)
}

/// Whether a view stays inside `len` elements.
fn in_bounds(len: usize, offset: usize, rows: usize, cols: usize, rs: usize, cs: usize) -> bool {
    rows == 0 || cols == 0 || last_index(offset, rows, cols, rs, cs).is_some_and(|last| last < len)
}

/// Whether the elements of a view are distinct memory: an output view that aliased itself (a zero
/// stride, or rows that overlap) would make the GEMM's writes race with its own reads.
fn distinct(rows: usize, cols: usize, rs: usize, cs: usize) -> bool {
    match (rows, cols) {
        (0, _) | (_, 0) | (1, 1) => true,
        (1, _) => cs > 0,
        (_, 1) => rs > 0,
        // One stride steps over a whole line of the other.
        _ => (cs > 0 && rs >= cols.saturating_mul(cs)) || (rs > 0 && cs >= rows.saturating_mul(rs)),
    }
}

impl<'a, S: Scalar> MatRef<'a, S> {
    /// A row-major `rows x cols` matrix at the start of `data`.
    pub fn new(data: &'a [S], rows: usize, cols: usize) -> Self {
        Self::strided(data, 0, rows, cols, cols, 1)
    }

    /// A general view: element (i, j) is `data[offset + i * rs + j * cs]`.
    pub fn strided(data: &'a [S], offset: usize, rows: usize, cols: usize, rs: usize, cs: usize) -> Self {
        assert!(in_bounds(data.len(), offset, rows, cols, rs, cs), "matrix view out of bounds");
        MatRef { data, offset, rows, cols, rs, cs }
    }

    pub fn t(self) -> Self {
        MatRef { rows: self.cols, cols: self.rows, rs: self.cs, cs: self.rs, ..self }
    }

    pub fn at(&self, i: usize, j: usize) -> S {
        self.data[self.offset + i * self.rs + j * self.cs]
    }

    /// Rows `r` and columns `c` of this view.
    pub fn block(self, r: Range<usize>, c: Range<usize>) -> Self {
        assert!(
            r.start <= r.end && r.end <= self.rows && c.start <= c.end && c.end <= self.cols,
            "block outside the view"
        );
        MatRef { offset: self.offset + r.start * self.rs + c.start * self.cs, rows: r.len(), cols: c.len(), ..self }
    }
}

impl<'a, S: Scalar> MatMut<'a, S> {
    pub fn new(data: &'a mut [S], rows: usize, cols: usize) -> Self {
        Self::strided(data, 0, rows, cols, cols, 1)
    }

    /// A general output view: element (i, j) is `data[offset + i * rs + j * cs]`, each element once.
    pub fn strided(data: &'a mut [S], offset: usize, rows: usize, cols: usize, rs: usize, cs: usize) -> Self {
        assert!(in_bounds(data.len(), offset, rows, cols, rs, cs), "matrix view out of bounds");
        assert!(distinct(rows, cols, rs, cs), "an output matrix view must not alias its own elements");
        MatMut { data, offset, rows, cols, rs, cs }
    }

    /// Rows `r` and columns `c` of this view.
    pub fn block(self, r: Range<usize>, c: Range<usize>) -> Self {
        assert!(
            r.start <= r.end && r.end <= self.rows && c.start <= c.end && c.end <= self.cols,
            "block outside the view"
        );
        MatMut { offset: self.offset + r.start * self.rs + c.start * self.cs, rows: r.len(), cols: c.len(), ..self }
    }
}

/// `c = alpha * a b + beta * c`; with `beta` = 0, `c` is not read (it may hold anything).
pub fn gemm<S: Scalar>(alpha: S, a: MatRef<S>, b: MatRef<S>, beta: S, c: MatMut<S>) {
    assert_eq!(a.cols, b.rows, "inner dimensions differ");
    assert_eq!((a.rows, b.cols), (c.rows, c.cols), "output shape differs");
    if c.rows == 0 || c.cols == 0 {
        return;
    }
    // SAFETY: every view was bounds-checked (without overflow) at construction, its strides fit
    // isize, `c`'s elements are distinct and `c` is uniquely borrowed.
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

    #[test]
    #[should_panic(expected = "must not alias")]
    fn an_output_view_with_a_zero_stride_is_refused() {
        let mut c = vec![0.0f64; 4];
        let _ = MatMut::strided(&mut c, 0, 2, 2, 0, 1);
    }

    #[test]
    #[should_panic(expected = "must not alias")]
    fn an_output_view_with_overlapping_rows_is_refused() {
        let mut c = vec![0.0f64; 8];
        let _ = MatMut::strided(&mut c, 0, 3, 3, 1, 1);
    }

    #[test]
    #[should_panic(expected = "out of bounds")]
    fn a_view_whose_last_index_overflows_is_refused() {
        let a = vec![0.0f64; 4];
        let _ = MatRef::strided(&a, 1, 2, 2, usize::MAX / 2 + 1, 1);
    }

    #[test]
    fn transposed_and_column_major_output_views_are_accepted() {
        let mut c = vec![0.0f64; 6];
        let v = MatMut::strided(&mut c, 0, 2, 3, 1, 2);
        assert_eq!((v.rows, v.cols), (2, 3));
        // An input may repeat elements (a broadcast row), an output may not.
        let a = vec![1.0f64; 3];
        let b = MatRef::strided(&a, 0, 4, 3, 0, 1);
        assert_eq!(b.at(3, 2), 1.0);
    }
}
