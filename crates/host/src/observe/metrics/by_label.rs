//! Counters of one metric that differ in one label whose values are an enum's variants: a
//! counter is named by the variant, never by its place in an array.

use std::sync::Arc;

use super::series::{Count, Labels};

/// An enum whose variants are the values of one metric label.
pub(crate) trait LabelValue: Copy + 'static {
    /// The label's name.
    const LABEL: &'static str;
    /// Every variant, each once.
    const ALL: &'static [Self];
    /// The label's value for this variant.
    fn value(self) -> &'static str;
}

/// One counter of a metric per value of `L`.
pub(crate) struct CountsBy<L> {
    counts: Box<[(L, Arc<Count>)]>,
}

impl<L: LabelValue + PartialEq> CountsBy<L> {
    /// The series of counter `name` with `labels` and each value of `L`.
    pub(crate) fn new(name: &'static str, labels: &[(&'static str, String)]) -> Self {
        let counts = L::ALL
            .iter()
            .map(|&value| {
                let mut labels: Labels = labels.to_vec();
                labels.push((L::LABEL, value.value().to_owned()));
                (value, super::counter(name, labels))
            })
            .collect();
        Self { counts }
    }

    /// The counter of `value`.
    pub(crate) fn of(&self, value: L) -> &Count {
        // At most a handful of values: a scan is as fast as an index, and cannot be misplaced.
        let (_, count) = self
            .counts
            .iter()
            .find(|(v, _)| *v == value)
            .expect("LabelValue::ALL lists every variant");
        count
    }

    /// Counts one of `value`.
    pub(crate) fn increment(&self, value: L) {
        self.of(value).increment(1);
    }
}

impl<L> std::fmt::Debug for CountsBy<L> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CountsBy").field("series", &self.counts.len()).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, Clone, Copy, PartialEq)]
    enum Color {
        Red,
        Blue,
    }

    impl LabelValue for Color {
        const LABEL: &'static str = "color";
        const ALL: &'static [Self] = &[Self::Red, Self::Blue];
        fn value(self) -> &'static str {
            match self {
                Self::Red => "red",
                Self::Blue => "blue",
            }
        }
    }

    #[test]
    fn each_value_counts_in_its_own_series() {
        let labels = vec![("route", "by-label-test".to_owned())];
        let counts = CountsBy::<Color>::new("edgegate_rate_limit_decisions_total", &labels);
        counts.increment(Color::Blue);
        counts.increment(Color::Blue);
        counts.increment(Color::Red);
        assert_eq!(counts.of(Color::Blue).get(), 2);
        assert_eq!(counts.of(Color::Red).get(), 1);
        let mut blue = labels.clone();
        blue.push(("color", "blue".to_owned()));
        let same = super::super::counter("edgegate_rate_limit_decisions_total", blue);
        assert_eq!(same.get(), 2, "the series a label names");
    }
}
