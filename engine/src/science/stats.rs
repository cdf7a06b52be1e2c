//! Small statistics shared by the experiments: a running mean with its standard error, and the
//! two-sample Kolmogorov-Smirnov distance.

/// Running mean and variance (Welford), so a Monte-Carlo estimate carries its own error bar.
#[derive(Clone, Copy, Debug, Default)]
pub struct Moments {
    n: usize,
    mean: f64,
    m2: f64,
}

impl Moments {
    pub fn push(&mut self, x: f64) {
        self.n += 1;
        let delta = x - self.mean;
        self.mean += delta / self.n as f64;
        self.m2 += delta * (x - self.mean);
    }

    pub fn count(&self) -> usize {
        self.n
    }

    pub fn mean(&self) -> f64 {
        if self.n == 0 {
            f64::NAN
        } else {
            self.mean
        }
    }

    /// Sample standard deviation (n - 1 in the denominator).
    pub fn sd(&self) -> f64 {
        if self.n < 2 {
            f64::NAN
        } else {
            (self.m2 / (self.n - 1) as f64).sqrt()
        }
    }

    /// Standard error of the mean.
    pub fn se(&self) -> f64 {
        self.sd() / (self.n as f64).sqrt()
    }
}

impl FromIterator<f64> for Moments {
    fn from_iter<I: IntoIterator<Item = f64>>(iter: I) -> Self {
        let mut m = Moments::default();
        iter.into_iter().for_each(|x| m.push(x));
        m
    }
}

/// The 5% critical value of the two-sample Kolmogorov-Smirnov distance for n and m samples
/// (the asymptotic 1.358 sqrt((n + m) / (n m))).
pub fn ks_critical(n: usize, m: usize) -> f64 {
    let (n, m) = (n.max(1) as f64, m.max(1) as f64);
    1.358 * ((n + m) / (n * m)).sqrt()
}

/// Two-sample Kolmogorov-Smirnov distance `sup_x |F_a(x) - F_b(x)|` between empirical CDFs.
/// NaNs are dropped (they have no place on the line); an empty sample gives NaN.
pub fn ks_distance(a: &[f64], b: &[f64]) -> f64 {
    let sorted = |s: &[f64]| {
        let mut v: Vec<f64> = s.iter().copied().filter(|x| !x.is_nan()).collect();
        v.sort_by(f64::total_cmp);
        v
    };
    let (a, b) = (sorted(a), sorted(b));
    if a.is_empty() || b.is_empty() {
        return f64::NAN;
    }
    // Walk both sorted samples; after consuming every copy of the next value, compare the CDFs.
    let (mut i, mut j, mut d) = (0, 0, 0.0f64);
    while i < a.len() && j < b.len() {
        let x = a[i].min(b[j]);
        while i < a.len() && a[i] <= x {
            i += 1;
        }
        while j < b.len() && b[j] <= x {
            j += 1;
        }
        d = d.max((i as f64 / a.len() as f64 - j as f64 / b.len() as f64).abs());
    }
    d
}

/// The standard normal quantile at 0.975: a 95% two-sided interval is mean ± 1.96 sd.
pub const Z_975: f64 = 1.959_963_984_540_054;

/// The chi-square quantile with `nu` degrees of freedom at the standard normal quantile `z`
/// (z = ±Z_975 for a 95% interval), by Wilson and Hilferty's cube-root approximation: relative
/// error under 1% at nu = 10 and under 1e-3 from nu = 100, the smallest the Brownian fits pool.
pub fn chi_square_quantile(nu: f64, z: f64) -> f64 {
    let c = 2.0 / (9.0 * nu);
    nu * (1.0 - c + z * c.sqrt()).powi(3)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn moments_match_direct_formulas() {
        let xs = [1.0, 2.0, 4.0, 7.0, 11.0];
        let m: Moments = xs.iter().copied().collect();
        let mean = xs.iter().sum::<f64>() / 5.0;
        let var = xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / 4.0;
        assert!((m.mean() - mean).abs() < 1e-12);
        assert!((m.sd() - var.sqrt()).abs() < 1e-12);
        assert!((m.se() - (var / 5.0).sqrt()).abs() < 1e-12);
        assert_eq!(m.count(), 5);
    }

    #[test]
    fn ks_distance_of_known_samples() {
        // Interleaved samples: the CDFs differ by at most one step of 1/3.
        assert!((ks_distance(&[1.0, 2.0, 3.0], &[1.5, 2.5, 3.5]) - 1.0 / 3.0).abs() < 1e-12);
        // Disjoint samples are at distance 1; identical ones at 0, ties included.
        assert_eq!(ks_distance(&[0.0, 1.0], &[5.0, 6.0, 7.0]), 1.0);
        assert_eq!(ks_distance(&[1.0, 1.0, 2.0], &[1.0, 1.0, 2.0]), 0.0);
        // Ties across samples: F_a(2) = 1, F_b(2) = 1/4.
        assert!((ks_distance(&[1.0, 2.0], &[1.0, 3.0, 4.0, 5.0]) - 0.75).abs() < 1e-12);
        assert!(ks_distance(&[], &[1.0]).is_nan());
    }

    #[test]
    fn chi_square_quantiles_match_the_tables() {
        // (nu, 2.5% and 97.5% points) from standard tables.
        for (nu, lo, hi, tol) in
            [(10.0, 3.247, 20.483, 1e-2), (100.0, 74.222, 129.561, 1e-3), (1000.0, 914.257, 1089.531, 1e-4)]
        {
            let (a, b) = (chi_square_quantile(nu, -Z_975), chi_square_quantile(nu, Z_975));
            assert!((a - lo).abs() < tol * lo && (b - hi).abs() < tol * hi, "nu {nu}: {a} {b}");
        }
    }
}
