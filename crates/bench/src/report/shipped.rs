//! The report's "edgegate as shipped" section: each capacity round as a ratio, edgegate at
//! the lab's `warn` and at its default log level against Node.js, and the one against the
//! other. The runtimes take turns within a round, so a round's ratio compares one stretch of
//! the VM's time; the medians of these ratios are what the issue targets name.

use std::fmt::Write as _;

use crate::catalogue::Runtime;
use crate::results::{Capacity, CapacityRound, LabTransport, Results, Spread};

/// Writes `### edgegate as shipped, round by round`, when edgegate ran at either level
/// beside another runtime it compares with.
pub(super) fn section(results: &Results, w: &mut String) {
    let capacity = |runtime: Runtime, workload| {
        results.result(runtime)?.capacity_over(workload, LabTransport::Plain)
    };
    let rows: Vec<String> = results
        .capacity_workloads()
        .into_iter()
        .filter_map(|workload| {
            let warn = capacity(Runtime::Edgegate, workload);
            let info = capacity(Runtime::EdgegateInfo, workload);
            let node = capacity(Runtime::Node, workload);
            let cells = [
                per_round(warn, node, |a, b| a.rps / b.rps, 2),
                per_round(info, node, |a, b| a.rps / b.rps, 2),
                per_round(info, warn, |a, b| a.rps / b.rps, 2),
                per_round(info, warn, |a, b| a.cpu_us_per_request - b.cpu_us_per_request, 1),
            ];
            cells.iter().any(Option::is_some).then(|| {
                let cells: Vec<String> =
                    cells.into_iter().map(|c| c.unwrap_or_else(|| "–".into())).collect();
                format!("| {} | {} |", workload.name(), cells.join(" | "))
            })
        })
        .collect();
    if rows.is_empty() {
        return;
    }
    let _ = writeln!(
        w,
        "### edgegate as shipped, round by round\n\nEach round's figures as a ratio, the runtimes having taken turns within the round (every round, calm or not); the median in bold. `edgegate` runs at the lab's `EDGEGATE_LOG=warn`; `edgegate-info` is the same configuration as shipped, at the default level (`info`), writing an access line per request to a file. Node.js's comparator (`bench/node/server.mjs`) and workerd write no access log at all.\n\n| workload | edgegate ÷ node, req/s | edgegate-info ÷ node, req/s | edgegate-info ÷ edgegate, req/s | edgegate-info − edgegate, CPU µs/req |\n|---|---|---|---|---|"
    );
    for row in rows {
        let _ = writeln!(w, "{row}");
    }
    let _ = writeln!(w);
}

/// `f(a's round, b's round)` for each round both have, in order, then their median:
/// `0.95, 0.91, 0.97 (**0.95**)`; `None` when either side is missing.
fn per_round(
    a: Option<&Capacity>,
    b: Option<&Capacity>,
    f: impl Fn(&CapacityRound, &CapacityRound) -> f64,
    digits: usize,
) -> Option<String> {
    let values: Vec<f64> = a?.rounds.iter().zip(&b?.rounds).map(|(a, b)| f(a, b)).collect();
    let median = Spread::of(values.iter().copied())?.median;
    let each: Vec<String> = values.iter().map(|v| format!("{v:.digits$}")).collect();
    Some(format!("{} (**{median:.digits$}**)", each.join(", ")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::{Meta, RuntimeResult};
    use crate::workload::Workload;

    fn result(runtime: Runtime, rounds: &[(f64, f64)]) -> RuntimeResult {
        let mut r = RuntimeResult::new(runtime, Some("1".into()));
        r.capacity.push(Capacity {
            workload: Workload::DbLookup,
            rounds: rounds
                .iter()
                .map(|&(rps, cpu)| CapacityRound {
                    rps,
                    cpu_us_per_request: cpu,
                    ..CapacityRound::default()
                })
                .collect(),
            ..Capacity::default()
        });
        r
    }

    #[test]
    fn each_round_is_a_ratio_of_that_rounds_figures() {
        let results = Results {
            meta: Meta::default(),
            runtimes: vec![
                result(Runtime::Edgegate, &[(100.0, 10.0), (90.0, 11.0), (120.0, 9.0)]),
                result(Runtime::EdgegateInfo, &[(95.0, 10.5), (90.0, 11.0), (108.0, 10.0)]),
                result(Runtime::Node, &[(50.0, 20.0), (60.0, 18.0), (60.0, 18.0)]),
            ],
        };
        let mut md = String::new();
        section(&results, &mut md);
        let row = "| db-lookup | 2.00, 1.50, 2.00 (**2.00**) | 1.90, 1.50, 1.80 (**1.80**) | 0.95, 1.00, 0.90 (**0.95**) | 0.5, 0.0, 1.0 (**0.5**) |";
        assert!(md.contains(row), "{md}");
        assert!(md.contains("write no access log"), "{md}");
    }

    #[test]
    fn without_node_the_node_columns_are_empty_and_without_edgegate_nothing_shows() {
        let mut md = String::new();
        let results = Results {
            meta: Meta::default(),
            runtimes: vec![
                result(Runtime::Edgegate, &[(100.0, 10.0)]),
                result(Runtime::EdgegateInfo, &[(90.0, 11.0)]),
            ],
        };
        section(&results, &mut md);
        assert!(md.contains("| db-lookup | – | – | 0.90 (**0.90**) | 1.0 (**1.0**) |"), "{md}");
        let mut empty = String::new();
        let node = Results {
            meta: Meta::default(),
            runtimes: vec![result(Runtime::Node, &[(50.0, 20.0)])],
        };
        section(&node, &mut empty);
        assert!(empty.is_empty(), "{empty}");
    }
}
