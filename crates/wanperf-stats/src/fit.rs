//! Least-squares fits with R²: linear, and power series as seed 000 fits RTT against
//! throughput (`y = a·x^b`, fitted on logarithms the way spreadsheet trend lines do).

use serde::{Deserialize, Serialize};
use thiserror::Error;

/// Why a fit is impossible.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum FitError {
    /// Fewer than two points.
    #[error("a fit needs at least two points")]
    TooFew,
    /// All x equal.
    #[error("all x values are equal: no slope to fit")]
    Degenerate,
    /// A power fit met a value that is not positive.
    #[error("a power fit needs positive x and y")]
    NotPositive,
}

/// A fitted line `y = intercept + slope·x`, or curve `y = coefficient·x^exponent`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Fit {
    /// Intercept (linear) or coefficient a (power).
    pub a: f64,
    /// Slope (linear) or exponent b (power).
    pub b: f64,
    /// Coefficient of determination (for power fits, on the logarithms).
    pub r2: f64,
    /// Points used.
    pub n: usize,
}

/// Ordinary least squares of `y` on `x`.
pub fn linear(x: &[f64], y: &[f64]) -> Result<Fit, FitError> {
    let n = x.len().min(y.len());
    if n < 2 {
        return Err(FitError::TooFew);
    }
    let (x, y) = (&x[..n], &y[..n]);
    let mx = x.iter().sum::<f64>() / n as f64;
    let my = y.iter().sum::<f64>() / n as f64;
    let sxx: f64 = x.iter().map(|v| (v - mx) * (v - mx)).sum();
    let sxy: f64 = x.iter().zip(y).map(|(a, b)| (a - mx) * (b - my)).sum();
    let syy: f64 = y.iter().map(|v| (v - my) * (v - my)).sum();
    if sxx == 0.0 {
        return Err(FitError::Degenerate);
    }
    let b = sxy / sxx;
    let a = my - b * mx;
    let r2 = if syy == 0.0 { 1.0 } else { (sxy * sxy) / (sxx * syy) };
    Ok(Fit { a, b, r2, n })
}

/// `y = a·x^b` by least squares on `ln y = ln a + b·ln x`.
pub fn power(x: &[f64], y: &[f64]) -> Result<Fit, FitError> {
    if x.iter().chain(y).any(|v| *v <= 0.0 || !v.is_finite()) {
        return Err(FitError::NotPositive);
    }
    let lx: Vec<f64> = x.iter().map(|v| v.ln()).collect();
    let ly: Vec<f64> = y.iter().map(|v| v.ln()).collect();
    let f = linear(&lx, &ly)?;
    Ok(Fit { a: f.a.exp(), b: f.b, r2: f.r2, n: f.n })
}

impl Fit {
    /// The linear fit's value at `x`.
    pub fn linear_at(&self, x: f64) -> f64 {
        self.a + self.b * x
    }

    /// The power fit's value at `x`.
    pub fn power_at(&self, x: f64) -> f64 {
        self.a * x.powf(self.b)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn linear_by_hand() {
        // y = 1 + 2x exactly: R² = 1.
        let f = linear(&[0.0, 1.0, 2.0, 3.0], &[1.0, 3.0, 5.0, 7.0]).unwrap();
        assert!((f.a - 1.0).abs() < 1e-12 && (f.b - 2.0).abs() < 1e-12 && (f.r2 - 1.0).abs() < 1e-12);
        // Points (1,1) (2,2) (3,2): slope 0.5, intercept 2/3, R² = 0.75.
        let f = linear(&[1.0, 2.0, 3.0], &[1.0, 2.0, 2.0]).unwrap();
        assert!((f.b - 0.5).abs() < 1e-12);
        assert!((f.a - 2.0 / 3.0).abs() < 1e-12);
        assert!((f.r2 - 0.75).abs() < 1e-12);
        assert_eq!(linear(&[1.0], &[1.0]), Err(FitError::TooFew));
        assert_eq!(linear(&[2.0, 2.0], &[1.0, 3.0]), Err(FitError::Degenerate));
    }

    #[test]
    fn power_recovers_exponent() {
        let x: Vec<f64> = (1..=20).map(f64::from).collect();
        let y: Vec<f64> = x.iter().map(|v| 3.0 * v.powf(0.5)).collect();
        let f = power(&x, &y).unwrap();
        assert!((f.a - 3.0).abs() < 1e-9 && (f.b - 0.5).abs() < 1e-12 && (f.r2 - 1.0).abs() < 1e-12);
        assert!((f.power_at(16.0) - 12.0).abs() < 1e-9);
        assert_eq!(power(&[1.0, 0.0], &[1.0, 1.0]), Err(FitError::NotPositive));
    }
}
