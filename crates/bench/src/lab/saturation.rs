//! The saturation search: the highest rate whose p99 stays under a bound.

use std::sync::Arc;
use std::time::Duration;

use super::Lab;
use crate::load::{self, RequestTemplate};
use crate::results::{Probe, Saturation};
use crate::server::Server;
use crate::workload::Workload;

impl<F: Fn(String)> Lab<'_, F> {
    /// The highest rate whose p99 stays under the bound with no errors, by [`search`] from
    /// the first fixed rate.
    pub(super) fn saturation(
        &self,
        server: &Server,
        workload: Workload,
        templates: &Arc<[RequestTemplate]>,
    ) -> anyhow::Result<Saturation> {
        let bound = self.plan.bound_of(workload);
        let (warmup, duration) = self.plan.probe;
        let mut s =
            Saturation { workload, bound_us: bound.as_secs_f64() * 1e6, ..Saturation::default() };
        let once = |rate: f64| -> anyhow::Result<bool> {
            self.progress.set_message(format!("{} saturation @ {rate:.0} rps", workload.name()));
            let spec = self.spec(server, rate, warmup, duration);
            let result = load::run(&spec, templates, &self.cpus.load, &|| None)?;
            let expected = rate * duration.as_secs_f64();
            let p99 = result.corrected.summary().p99;
            let pass = result.errors.total() == 0
                && result.ok as f64 >= expected * 0.95
                && p99 <= s.bound_us;
            let kept = result.kept_schedule(self.plan.slack_of(workload));
            s.probes.push(Probe {
                rate,
                p99_us: p99,
                errors: result.errors.total(),
                pass,
                kept_schedule: kept,
                lateness_p99_us: result.dispatch_lateness.summary().p99,
            });
            self.progress.inc(1);
            // Idle a moment, so one probe's backlog does not spill into the next.
            std::thread::sleep(Duration::from_millis(200));
            Ok(pass)
        };
        let start = self.plan.rates_of(workload, None).first().copied().unwrap_or(1000.0);
        let cap = if workload.heavy() { 5_000.0 } else { 500_000.0 };
        let floor = start / f64::from(self.plan.search_down.max(1));
        let good = search(start, floor, cap, self.plan.bisect_steps, once)?;
        s.rate = good;
        // When the generator itself fell behind at the lowest failing rate, the server's limit
        // may be above what was measured.
        let passed = |rate: f64| s.probes.iter().any(|p| p.pass && p.rate == rate);
        s.limited_by_load = s
            .probes
            .iter()
            .filter(|p| !p.pass && !passed(p.rate))
            .min_by(|a, b| a.rate.total_cmp(&b.rate))
            .is_some_and(|p| !p.kept_schedule);
        Ok(s)
    }
}

/// The saturation search over `probe` (true: the rate kept under the bound): doubles from
/// `start` up to `cap` until a rate fails, or halves down to `floor` until one passes, then
/// bisects `steps` times between the last good and the first bad rate. One VM hiccup must not
/// end it: a rate fails only when a second probe at it fails too. Returns the highest good
/// rate, if any.
fn search(
    start: f64,
    floor: f64,
    cap: f64,
    steps: u32,
    mut once: impl FnMut(f64) -> anyhow::Result<bool>,
) -> anyhow::Result<Option<f64>> {
    let mut probe = |rate: f64| -> anyhow::Result<bool> { Ok(once(rate)? || once(rate)?) };
    let (mut good, mut bad) = (None, None);
    let mut rate = start;
    if probe(rate)? {
        good = Some(rate);
        while rate < cap {
            rate *= 2.0;
            if probe(rate)? {
                good = Some(rate);
            } else {
                bad = Some(rate);
                break;
            }
        }
    } else {
        bad = Some(rate);
        // A runtime over the bound even at the floor has no rate to speak of, and each step
        // down costs two probes.
        while rate > floor.max(1.0) {
            rate /= 2.0;
            if probe(rate)? {
                good = Some(rate);
                break;
            }
            bad = Some(rate);
        }
    }
    if let (Some(mut lo), Some(mut hi)) = (good, bad) {
        for _ in 0..steps {
            let mid = ((lo + hi) / 2.0).round();
            if mid <= lo || mid >= hi {
                break;
            }
            if probe(mid)? { lo = mid } else { hi = mid }
        }
        good = Some(lo);
    }
    Ok(good)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs [`search`] from 1000 rps against a server that keeps its p99 under the bound up to
    /// `limit`, except that the first probe at each rate in `hiccups` fails. Returns what the
    /// search found and every rate it probed.
    fn saturate(limit: f64, hiccups: Vec<f64>) -> (Option<f64>, Vec<f64>) {
        saturate_down_to(62.5, limit, hiccups)
    }

    /// The same, halving down to `floor` when 1000 fails.
    fn saturate_down_to(floor: f64, limit: f64, mut hiccups: Vec<f64>) -> (Option<f64>, Vec<f64>) {
        let mut tried = Vec::new();
        let found = search(1000.0, floor, 500_000.0, 4, |rate| {
            tried.push(rate);
            if let Some(i) = hiccups.iter().position(|&h| h == rate) {
                hiccups.remove(i);
                return Ok(false);
            }
            Ok(rate <= limit)
        })
        .unwrap();
        (found, tried)
    }

    #[test]
    fn the_search_doubles_then_bisects_to_the_limit() {
        let (found, tried) = saturate(6000.0, vec![]);
        assert_eq!(found, Some(6000.0));
        // 8000 and the bisection's failures are each probed twice.
        assert_eq!(
            tried,
            [1000., 2000., 4000., 8000., 8000., 6000., 7000., 7000., 6500., 6500., 6250., 6250.]
        );
    }

    #[test]
    fn one_hiccup_does_not_end_the_search() {
        let (found, tried) = saturate(6000.0, vec![4000.0]);
        assert_eq!(found, Some(6000.0), "{tried:?}");
        assert_eq!(tried.iter().filter(|&&r| r == 4000.0).count(), 2, "{tried:?}");
    }

    #[test]
    fn a_runtime_over_the_bound_everywhere_has_no_rate() {
        let (found, tried) = saturate(0.0, vec![]);
        assert_eq!(found, None);
        // Halved down to the floor, a sixteenth of the start, each rate twice.
        assert_eq!(tried, [1000., 1000., 500., 500., 250., 250., 125., 125., 62.5, 62.5]);
        // The quick plan's floor, a quarter: two steps down, then none.
        let (found, tried) = saturate_down_to(250.0, 0.0, vec![]);
        assert_eq!((found, tried), (None, vec![1000., 1000., 500., 500., 250., 250.]));
        // A rate that passes on the way down is bisected up from.
        let (found, _) = saturate_down_to(250.0, 700.0, vec![]);
        assert_eq!(found, Some(688.0));
    }
}
