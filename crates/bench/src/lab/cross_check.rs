//! The cross-check with wrk: one endpoint loaded by wrk and by the lab at the same time.

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;

use super::Lab;
use super::slices::{steal, stolen};
use crate::load::{self, RequestTemplate};
use crate::results::{CrossCheck, CrossRound, Percentiles};
use crate::server::Server;
use crate::workload::Workload;

/// Rounds of the cross-check, each one run of wrk and one of the lab.
const CROSS_CHECK_ROUNDS: usize = 4;

/// How long each wrk connection waits after an answer, in the cross-check.
const WRK_PAUSE_MS: u64 = 2;

/// wrk's script for the cross-check: pace each connection, print the figures as JSON (µs).
const WRK_SCRIPT: &str = r#"-- Written by `edgegate bench --cross-check`.
local pause_ms = tonumber(os.getenv("WRK_PAUSE_MS") or "2")
function delay() return pause_ms end
done = function(summary, latency, requests)
  io.write(string.format('{"requests":%d,"duration_us":%d,"p50":%d,"p99":%d}\n',
    summary.requests, summary.duration, latency:percentile(50), latency:percentile(99)))
end
"#;

impl<F: Fn(String)> Lab<'_, F> {
    /// The same endpoint (`GET /kv/user:1`) measured by wrk (Debian's, a lean C client) and
    /// by the lab **at the same time**, each at about half the first fixed rate on its own
    /// connections (the lab on as many as in its fixed-rate runs, so the check is of the
    /// figures it reports), in [`CROSS_CHECK_ROUNDS`] rounds: the VM's hiccups, which move a
    /// p99 2–3× between runs a minute apart, then fall on both tools alike. wrk has no
    /// constant-rate mode: each connection pauses [`WRK_PAUSE_MS`] after each answer (its Lua
    /// `delay()`), so `rate × pause` connections give about the rate. A short wrk run first
    /// finds the rate wrk reaches; each round's lab runs at the rate wrk reached in the round
    /// before.
    pub(super) fn cross_check(
        &self,
        server: &Server,
        wrk: &std::path::Path,
    ) -> anyhow::Result<CrossCheck> {
        let (template, _) = self.fixtures.requests(Workload::DbLookup).swap_remove(0);
        let url = format!("http://{}{}", server.addr, template.uri);
        let half = self.plan.rates.first().copied().unwrap_or(2000.0) / 2.0;
        let connections = ((half * WRK_PAUSE_MS as f64 / 1000.0).round() as usize).max(1);
        let script = self.env.work.join("cross-check.lua");
        std::fs::write(&script, WRK_SCRIPT)?;
        let start_wrk = |duration: Duration| -> anyhow::Result<std::process::Child> {
            self.cpus
                .spawn_load(
                    std::process::Command::new(wrk)
                        .args(["-t1", "-c", &connections.to_string(), "-d"])
                        .arg(format!("{}s", duration.as_secs().max(1)))
                        .arg("-s")
                        .arg(&script)
                        .arg(&url)
                        .env("WRK_PAUSE_MS", WRK_PAUSE_MS.to_string())
                        .stdout(std::process::Stdio::piped())
                        .stderr(std::process::Stdio::piped()),
                )
                .with_context(|| format!("starting {}", wrk.display()))
        };
        let (mut rate, _) = wrk_result(start_wrk(Duration::from_secs(3))?)?;
        let templates: Arc<[RequestTemplate]> = Arc::from(vec![template]);
        // wrk runs a second longer on each side of the lab's recorded window.
        let wrk_duration = self.plan.warmup + self.plan.duration + Duration::from_secs(2);
        let mut rounds = Vec::with_capacity(CROSS_CHECK_ROUNDS);
        for _ in 0..CROSS_CHECK_ROUNDS {
            let spec = self.spec(server, rate, self.plan.warmup, self.plan.duration);
            let running = start_wrk(wrk_duration)?;
            std::thread::sleep(Duration::from_secs(1));
            let lab = load::run(&spec, &templates, &self.cpus.load, &|| None);
            let (wrk_rate, wrk) = wrk_result(running)?;
            let lab = lab?;
            rounds.push(CrossRound {
                lab_rate: rate,
                wrk_rate,
                wrk,
                lab: lab.corrected.summary().into(),
                lab_sent: lab.uncorrected.summary().into(),
                steal: lab.cpu_times.as_ref().map(|window| {
                    let (server, load) = stolen(self.cpus, window);
                    steal(server, load)
                }),
            });
            // The next round's lab runs at the rate wrk reached in this one.
            rate = wrk_rate;
        }
        Ok(CrossCheck { url, connections, lab_connections: self.plan.connections, rounds })
    }
}

/// Waits for wrk and reads the rate and the percentiles (µs) its script printed.
fn wrk_result(wrk: std::process::Child) -> anyhow::Result<(f64, Percentiles)> {
    let out = wrk.wait_with_output()?;
    anyhow::ensure!(out.status.success(), "wrk failed: {}", String::from_utf8_lossy(&out.stderr));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let line =
        stdout.lines().rev().find(|l| l.starts_with('{')).context("no result line from wrk")?;
    let json: serde_json::Value = serde_json::from_str(line).context("reading wrk's result")?;
    let number = |k: &str| json[k].as_f64().with_context(|| format!("wrk's result has no {k}"));
    let rate = number("requests")? / (number("duration_us")? / 1e6);
    Ok((rate, Percentiles { p50: number("p50")?, p99: number("p99")? }))
}
