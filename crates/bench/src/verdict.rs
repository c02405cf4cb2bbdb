//! When a difference between two runtimes is a result and when it is noise.
//!
//! Each side is measured in rounds, the runtimes taking turns. A winner is named only when
//!
//! * the two sides' per-round ranges do not overlap, or
//! * a bootstrap interval of the ratio of their medians (99 %, 2000 resamples of the rounds)
//!   leaves out 1;
//!
//! otherwise the answer is "no measurable difference", with the interval. Fewer than
//! [`MIN_ROUNDS`] rounds on either side give no verdict at all. The resampling is seeded by
//! the data, so the same figures always give the same verdict.

use serde::{Deserialize, Serialize};

use crate::results::Spread;

/// The fewest rounds on each side for a verdict.
pub const MIN_ROUNDS: usize = 5;

/// Bootstrap resamples.
const RESAMPLES: usize = 2000;

/// The interval's tails: 0.5 % on each side, a 99 % interval.
const TAIL: f64 = 0.005;

/// The ratio of two sides' medians (first ÷ second) and its bootstrap interval.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Ratio {
    /// median(first) ÷ median(second).
    pub ratio: f64,
    /// The interval's low end.
    pub lo: f64,
    /// Its high end.
    pub hi: f64,
}

/// What two sets of rounds say.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// The first side is better.
    First(Ratio),
    /// The second side is better.
    Second(Ratio),
    /// No measurable difference: the interval holds 1.
    NoDifference(Ratio),
    /// Too few rounds on a side to say: how many the shorter side has.
    TooFew(usize),
}

impl Verdict {
    /// The ratio of medians and its interval, when there is one.
    pub fn ratio(&self) -> Option<Ratio> {
        match *self {
            Self::First(r) | Self::Second(r) | Self::NoDifference(r) => Some(r),
            Self::TooFew(_) => None,
        }
    }
}

/// Compares `first` with `second`, round figures of one metric; `higher_wins` says which way
/// is better.
pub fn compare(first: &[f64], second: &[f64], higher_wins: bool) -> Verdict {
    let rounds = first.len().min(second.len());
    let (Some(a), Some(b)) =
        (Spread::of(first.iter().copied()), Spread::of(second.iter().copied()))
    else {
        return Verdict::TooFew(0);
    };
    if rounds < MIN_ROUNDS || b.median == 0.0 {
        return Verdict::TooFew(rounds);
    }
    let ratio = a.median / b.median;
    let (lo, hi) = interval(first, second);
    let apart = a.max < b.min || b.max < a.min;
    let first_better = if higher_wins { ratio > 1.0 } else { ratio < 1.0 };
    let r = Ratio { ratio, lo, hi };
    match (apart || lo > 1.0 || hi < 1.0, first_better) {
        (true, true) => Verdict::First(r),
        (true, false) => Verdict::Second(r),
        (false, _) => Verdict::NoDifference(r),
    }
}

/// The bootstrap interval of median(first) ÷ median(second).
fn interval(first: &[f64], second: &[f64]) -> (f64, f64) {
    let mut rng = Rng::seeded(
        first
            .iter()
            .chain(second)
            .fold(0x9E37_79B9_7F4A_7C15, |h, x| (h ^ x.to_bits()).wrapping_mul(0x0100_0000_01B3)),
    );
    let mut ratios: Vec<f64> = (0..RESAMPLES)
        .filter_map(|_| {
            let a = median(&rng.resample(first))?;
            let b = median(&rng.resample(second))?;
            (b != 0.0).then(|| a / b)
        })
        .collect();
    ratios.sort_by(f64::total_cmp);
    let at = |q: f64| ratios[((ratios.len() - 1) as f64 * q).round() as usize];
    if ratios.is_empty() { (f64::NAN, f64::NAN) } else { (at(TAIL), at(1.0 - TAIL)) }
}

fn median(values: &[f64]) -> Option<f64> {
    Spread::of(values.iter().copied()).map(|s| s.median)
}

/// xorshift64*: a small deterministic generator for the resampling.
struct Rng(u64);

impl Rng {
    fn seeded(seed: u64) -> Self {
        Self(seed.max(1))
    }

    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// As many values as `from` has, drawn from it with replacement.
    fn resample(&mut self, from: &[f64]) -> Vec<f64> {
        (0..from.len()).map(|_| from[(self.next() % from.len() as u64) as usize]).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn apart_ranges_name_a_winner_either_way() {
        let fast = [100.0, 104.0, 98.0, 101.0, 103.0];
        let slow = [80.0, 83.0, 79.0, 84.0, 81.0];
        assert!(matches!(compare(&fast, &slow, true), Verdict::First(r) if r.ratio > 1.2));
        assert!(matches!(compare(&slow, &fast, true), Verdict::Second(_)));
        // Lower is better (CPU per request): the same figures, the other way round.
        assert!(matches!(compare(&slow, &fast, false), Verdict::First(_)));
    }

    #[test]
    fn overlapping_rounds_of_the_same_thing_are_no_difference() {
        let a = [100.0, 97.0, 104.0, 99.0, 102.0];
        let b = [101.0, 96.0, 103.0, 100.0, 98.0];
        let v = compare(&a, &b, true);
        assert!(matches!(v, Verdict::NoDifference(r) if r.lo < 1.0 && r.hi > 1.0), "{v:?}");
        assert_eq!(compare(&a, &b, true), v, "the same figures, the same verdict");
    }

    #[test]
    fn one_wild_round_does_not_decide_and_too_few_rounds_say_nothing() {
        // Overlapping only because of one low round: the medians are far apart and nearly
        // every resample keeps them so: a winner.
        let a = [100.0, 101.0, 99.0, 100.0, 83.0];
        let b = [80.0, 81.0, 79.0, 80.0, 84.0];
        assert!(matches!(compare(&a, &b, true), Verdict::First(_)), "{:?}", compare(&a, &b, true));
        assert_eq!(compare(&a[..4], &b, true), Verdict::TooFew(4));
        assert_eq!(compare(&[], &b, true), Verdict::TooFew(0));
    }
}
