//! Latencies in an HdrHistogram, and the figures a report takes from them.
//!
//! Values are recorded in nanoseconds from 1 ns to 100 s with three significant digits (an
//! error of at most 0.1 % at any value), so merging the histograms of several load threads
//! loses nothing.

use std::time::Duration;

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

/// The longest latency recorded as itself; longer ones are recorded as this.
const HIGHEST: Duration = Duration::from_secs(100);

/// The quantiles a report's CDF is drawn through.
const CDF_QUANTILES: &[f64] = &[
    0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.75, 0.8, 0.85, 0.9, 0.925, 0.95, 0.97, 0.98, 0.99,
    0.995, 0.999, 0.9995, 0.9999, 1.0,
];

/// A histogram of latencies.
#[derive(Debug, Clone)]
pub struct Latencies(Histogram<u64>);

impl Default for Latencies {
    fn default() -> Self {
        let highest = u64::try_from(HIGHEST.as_nanos()).unwrap_or(u64::MAX);
        // The bounds are constants that hdrhistogram accepts: 1 ≤ low, 2·low ≤ high, 3 digits.
        Self(Histogram::new_with_bounds(1, highest, 3).expect("valid histogram bounds"))
    }
}

impl Latencies {
    /// Records one latency; one above 100 s counts as 100 s.
    pub fn record(&mut self, latency: Duration) {
        let nanos = u64::try_from(latency.as_nanos()).unwrap_or(u64::MAX);
        self.0.saturating_record(nanos.max(1));
    }

    /// Adds every value of `other`.
    pub fn merge(&mut self, other: &Self) {
        // Same bounds on both sides, so the addition cannot fail; saturate rather than panic.
        if self.0.add(&other.0).is_err() {
            for value in other.0.iter_recorded() {
                self.0.saturating_record_n(value.value_iterated_to(), value.count_at_value());
            }
        }
    }

    /// How many latencies were recorded.
    pub fn count(&self) -> u64 {
        self.0.len()
    }

    /// The latency at quantile `q` (0 to 1).
    pub fn quantile(&self, q: f64) -> Duration {
        Duration::from_nanos(self.0.value_at_quantile(q))
    }

    /// The figures of a report, in microseconds.
    pub fn summary(&self) -> Summary {
        let us = |nanos: f64| nanos / 1000.0;
        let at = |q: f64| us(self.0.value_at_quantile(q) as f64);
        Summary {
            count: self.0.len(),
            p50: at(0.5),
            p95: at(0.95),
            p99: at(0.99),
            p999: at(0.999),
            max: us(self.0.max() as f64),
            mean: us(self.0.mean()),
            stddev: us(self.0.stdev()),
            cdf: CDF_QUANTILES.iter().map(|&q| (q, at(q))).collect(),
        }
    }
}

/// Percentiles, mean and spread of one run, in microseconds.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    /// Latencies recorded.
    pub count: u64,
    /// Median.
    pub p50: f64,
    /// 95th percentile.
    pub p95: f64,
    /// 99th percentile.
    pub p99: f64,
    /// 99.9th percentile.
    pub p999: f64,
    /// Largest.
    pub max: f64,
    /// Mean.
    pub mean: f64,
    /// Standard deviation.
    pub stddev: f64,
    /// `(quantile, latency)` points of the distribution, for the CDF chart.
    pub cdf: Vec<(f64, f64)>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn micros(values: impl IntoIterator<Item = u64>) -> Latencies {
        let mut l = Latencies::default();
        for v in values {
            l.record(Duration::from_micros(v));
        }
        l
    }

    #[test]
    fn percentiles_of_a_known_distribution() {
        // 1..=1000 µs, once each: the p-th percentile is p·10 µs, within 0.1 %.
        let s = micros(1..=1000).summary();
        assert_eq!(s.count, 1000);
        for (got, want) in [(s.p50, 500.0), (s.p95, 950.0), (s.p99, 990.0), (s.p999, 999.0)] {
            assert!((got - want).abs() <= want * 0.001, "{got} vs {want}");
        }
        assert!((s.max - 1000.0).abs() <= 1.0);
        assert!((s.mean - 500.5).abs() < 1.0, "{}", s.mean);
        assert!((s.stddev - 288.7).abs() < 1.0, "{}", s.stddev);
        assert_eq!(s.cdf.first().map(|p| p.0), Some(0.0));
        assert_eq!(s.cdf.last().map(|p| p.0), Some(1.0));
        assert!(s.cdf.windows(2).all(|w| w[0].1 <= w[1].1), "a CDF never goes down");
    }

    #[test]
    fn merging_is_the_same_as_recording_everything_in_one() {
        let mut merged = micros((1..=1000).filter(|v| v % 2 == 0));
        merged.merge(&micros((1..=1000).filter(|v| v % 2 == 1)));
        let whole = micros(1..=1000);
        assert_eq!(merged.summary(), whole.summary());
        // A merge moves the tail: one slow thread must show in the merged p99.9.
        let mut fast = micros(std::iter::repeat_n(100, 990));
        fast.merge(&micros(std::iter::repeat_n(50_000, 10)));
        assert!(fast.summary().p999 >= 49_900.0, "{}", fast.summary().p999);
        assert!(fast.summary().p50 <= 101.0);
    }

    #[test]
    fn values_out_of_range_saturate_instead_of_failing() {
        let mut l = Latencies::default();
        l.record(Duration::ZERO);
        l.record(Duration::from_secs(1000));
        assert_eq!(l.count(), 2);
        assert!(l.quantile(1.0) >= Duration::from_secs(99));
    }
}
