//! The hot swap, twin of the "start after a new version" cold start: a running edgegate gets
//! a new echo-json version through `POST /reload`, and the lab times the reload and the first
//! answer after it.

use std::time::{Duration, Instant};

use anyhow::Context;

use super::{Lab, ms};
use crate::load::{RequestTemplate, request_once};
use crate::results::{ColdStart, Spread};
use crate::runtimes::Prepared;
use crate::server::Server;

/// Swaps timed: each costs a compile (about 0.1 s) and a few milliseconds of answers.
const SWAPS: u32 = 5;

/// Answers timed before each swap, for the steady p50 the first one after it is set against.
const STEADY: usize = 21;

/// What one swap took.
struct Swap {
    /// From sending `POST /reload` (which compiles the new version) to the end of the first
    /// answer after it.
    reload_to_answer: Duration,
    /// The first answer after the swap, less the steady p50 of the same request.
    first_over_p50: f64,
}

impl<F: Fn(String)> Lab<'_, F> {
    /// Five hot swaps of echo-json on `server` (started with version 1), each to a version
    /// it has not compiled yet. Returns the two figures, each with its rounds.
    pub(super) fn hot_swaps(
        &self,
        prepared: &Prepared,
        server: &Server,
        probe: &RequestTemplate,
    ) -> anyhow::Result<[ColdStart; 2]> {
        let admin = server.admin.context("the server has no admin address")?;
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
        let mut swaps = Vec::new();
        for version in 2..2 + SWAPS {
            self.env.deploy_echo_json(prepared.runtime, version).map_err(anyhow::Error::msg)?;
            swaps.push(runtime.block_on(swap(server, admin, probe))?);
        }
        let figure = |what: &str, rounds: Vec<f64>| ColdStart {
            what: what.into(),
            ms: Spread::of(rounds.iter().copied()).map_or(0.0, |s| s.median),
            rounds,
        };
        Ok([
            figure(
                "hot swap to a new echo-json version: POST /reload (it compiles) to the first answer",
                swaps.iter().map(|s| ms(s.reload_to_answer)).collect(),
            ),
            figure(
                "first answer after a hot swap, over the steady p50 of the same request",
                swaps.iter().map(|s| s.first_over_p50).collect(),
            ),
        ])
    }
}

/// Times the steady answer, reloads, and times the first answer after the swap.
async fn swap(
    server: &Server,
    admin: std::net::SocketAddr,
    probe: &RequestTemplate,
) -> anyhow::Result<Swap> {
    let mut steady = Vec::with_capacity(STEADY);
    for _ in 0..STEADY {
        steady.push(ms(answer(server, probe).await?));
    }
    let p50 = Spread::of(steady).map_or(0.0, |s| s.median);
    let reload = RequestTemplate {
        method: http::Method::POST,
        uri: http::Uri::from_static("/reload"),
        headers: Vec::new(),
        body: bytes::Bytes::new(),
        expect: 200,
    };
    let started = Instant::now();
    let (status, body) = request_once(admin, &reload).await?;
    let text = String::from_utf8_lossy(&body);
    anyhow::ensure!(status == 200, "POST /reload answered {status}: {text}");
    let reloaded: serde_json::Value = serde_json::from_slice(&body)?;
    anyhow::ensure!(
        reloaded["changed"].as_array().is_some_and(|c| c.iter().any(|w| w == "echo-json")),
        "the reload did not change echo-json: {text}"
    );
    let first = answer(server, probe).await?;
    Ok(Swap { reload_to_answer: started.elapsed(), first_over_p50: ms(first) - p50 })
}

/// One answer to `probe`, which must be 200, and how long it took.
async fn answer(server: &Server, probe: &RequestTemplate) -> anyhow::Result<Duration> {
    let started = Instant::now();
    let (status, _) = request_once(server.addr, probe).await?;
    anyhow::ensure!(status == 200, "{} {} answered {status}", probe.method, probe.uri);
    Ok(started.elapsed())
}
