//! The report's capacity section: answers per second with the server's CPU kept busy, CPU
//! per answer, and the wrk cross-check of each.

use std::fmt::Write as _;

use crate::results::{Capacity, CapacityRound, LabTransport, Results, Spread};

/// Writes `## Capacity`, when any was measured.
pub(super) fn section(results: &Results, w: &mut String) {
    let workloads = results.capacity_workloads();
    if workloads.is_empty() {
        return;
    }
    let rounds = results
        .measured()
        .flat_map(|r| r.capacity.iter().map(|c| c.rounds.len()))
        .max()
        .unwrap_or(0);
    let _ = writeln!(
        w,
        "\n## Capacity\n\nA closed loop: each keep-alive connection sends its next request as soon as the last is answered, the server alone on its CPU, the generator on the others, on as many connections as it took for answers per second to stop growing. Each figure is the median of {rounds} rounds [min–max], the runtimes taking turns (the others stopped); wrk ran the same connections right after each round. A figure marked ≥ is a lower bound: the server used under {:.0} % of its CPU in most rounds, and the note under the table says what held it. Calm rounds: under 1 % steal and 1 % other processes on the lab's CPUs, and every request answered; only they give verdicts. Over TLS (`--tls`), every runtime serves one certificate (ECDSA P-256, from the lab's own authority) and the generator is a rustls client; \"a handshake per request\" opens a connection for each request, resumed from a session ticket or full, so its CPU per request includes the handshake.\n",
        CapacityRound::SATURATED_PCT
    );
    let transports = std::iter::once(LabTransport::Plain).chain(LabTransport::TLS);
    let tables =
        workloads.iter().flat_map(|&workload| transports.clone().map(move |t| (workload, t)));
    for (workload, transport) in tables {
        if !results.measured().any(|r| r.capacity_over(workload, transport).is_some()) {
            continue;
        }
        match transport {
            LabTransport::Plain => {
                let _ = writeln!(w, "### {}\n", workload.name());
            }
            tls => {
                let _ = writeln!(w, "### {} over {}\n", workload.name(), tls.name());
            }
        }
        let _ = writeln!(
            w,
            "| runtime | req/s | wrk req/s | lab within 10 % of wrk | CPU µs/req | server CPU % | p50 / p99 µs | connections | calm rounds |\n|---|---|---|---|---|---|---|---|---|"
        );
        let mut notes = Vec::new();
        for r in results.measured() {
            let Some(c) = r.capacity_over(workload, transport) else { continue };
            let Some(rps) = c.rps() else { continue };
            let bound = if c.saturated() { "" } else { "≥ " };
            let cpu = Spread::of(c.rounds.iter().map(|r| r.server_cpu_pct));
            let p50 = Spread::of(c.rounds.iter().map(|r| r.p50_us));
            let p99 = Spread::of(c.rounds.iter().map(|r| r.p99_us));
            let checked = c.rounds.iter().filter(|r| r.wrk.is_some()).count();
            let _ = writeln!(
                w,
                "| {} | {bound}{} | {} | {} | {} | {} | {} / {} | {} | {} of {} |",
                r.runtime.name(),
                spread(rps, 0),
                c.wrk_rps().map_or("–".into(), |s| spread(s, 0)),
                if checked == 0 {
                    "–".into()
                } else {
                    format!("{} of {checked}", c.agreeing_with_wrk())
                },
                c.cpu_us().map_or("–".into(), |s| spread(s, 1)),
                cpu.map_or("–".into(), |s| format!("{:.0}–{:.0}", s.min, s.max)),
                p50.map_or("–".into(), |s| format!("{:.0}", s.median)),
                p99.map_or("–".into(), |s| format!("{:.0}", s.median)),
                c.connections,
                c.calm().count(),
                c.rounds.len(),
            );
            if let Some(why) = median_round(c).and_then(CapacityRound::bottleneck) {
                notes.push(format!("- {} is a lower bound: {why}.", r.runtime.name()));
            }
        }
        for note in notes {
            let _ = writeln!(w, "\n{note}");
        }
        let _ = writeln!(w);
    }
}

/// A median with its range: `41700 [31259–41700]`.
fn spread(s: Spread, digits: usize) -> String {
    format!("{:.d$} [{:.d$}–{:.d$}]", s.median, s.min, s.max, d = digits)
}

/// The round whose answers per second are the median.
fn median_round(c: &Capacity) -> Option<&CapacityRound> {
    let mut rounds: Vec<&CapacityRound> = c.rounds.iter().collect();
    rounds.sort_by(|a, b| a.rps.total_cmp(&b.rps));
    rounds.get(rounds.len() / 2).copied()
}
