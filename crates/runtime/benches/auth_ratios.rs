//! The ratios the edge-auth targets are stated in, measured so that they survive a shared,
//! noisy machine: every variant runs in turn, round after round, and each keeps its best
//! round (the least disturbed one). Variants are those of `auth.rs`.
//!
//! * host path overhead = `host-path/ALG − baseline` (same request, same body, to `/ok`), and
//!   its ratio to `ring` alone: `(native + overhead) / native`, target ≤ 1.2 for RS256, ES256;
//! * HS256 auth added to a request = `auth-router/HS256 − echo-json/isolation`, target ≤ 3 µs,
//!   printed with echo's own time so it can be read as a ratio too, for both of auth-router's
//!   ways: the claims from the host (`jwt_claims`) and taken apart in the guest.
//!
//! Run: `cargo bench -p edgegate-runtime --bench auth_ratios` (ROUNDS=… to change the 15).

mod common;

use std::time::Instant;

/// The best per-iteration time, in µs, of `f` over `rounds` rounds of `n` iterations, one
/// round of each variant after the other.
fn best_of(variants: &[(&str, &dyn Fn())], rounds: usize, n: usize) -> Vec<f64> {
    let mut best = vec![f64::MAX; variants.len()];
    for _ in 0..rounds {
        for (i, (_, f)) in variants.iter().enumerate() {
            for _ in 0..n / 10 {
                f();
            }
            let start = Instant::now();
            for _ in 0..n {
                f();
            }
            best[i] = best[i].min(start.elapsed().as_secs_f64() * 1e6 / n as f64);
        }
    }
    best
}

fn main() {
    // `cargo bench` passes `--bench`; nothing else is read.
    let rounds = std::env::var("ROUNDS").ok().and_then(|r| r.parse().ok()).unwrap_or(15);
    let setup = common::Setup::new();
    println!("edge auth, best of {rounds} interleaved rounds (µs per request)");
    for signer in &setup.signers {
        let token = common::token(signer);
        let (input, sig) = common::split(&token);
        let verify = common::native(signer);
        let native = move || assert!(verify(&input, &sig));
        let baseline = setup.baseline(&token);
        let host = setup.host_path(&token);
        let n = if signer.alg().is_hmac() { 20_000 } else { 500 };
        let t =
            best_of(&[("native", &native), ("baseline", &baseline), ("host", &host)], rounds, n);
        let overhead = t[2] - t[1];
        println!(
            "{:<6} ring {:>8.2}  host path {:>8.2} − baseline {:>6.2} = {:>8.2}  ratio to ring {:.2}",
            signer.alg().name(),
            t[0],
            t[2],
            t[1],
            overhead,
            overhead / t[0],
        );
    }
    let echo = setup.echo_isolation();
    let token = common::token(&setup.signers[0]);
    let auth = setup.auth_router(&token, false);
    let in_host = setup.auth_router(&token, true);
    let whole = setup.whole_in_host(&token);
    let variants: [(&str, &dyn Fn()); 4] =
        [("echo", &echo), ("auth", &auth), ("in-host", &in_host), ("whole", &whole)];
    let t = best_of(&variants, rounds, 20_000);
    for (i, how) in [(1, "claims in the guest"), (2, "claims from the host")] {
        println!(
            "HS256 auth-router, {how}: {:.2} − echo-json isolation {:.2} = {:.2} added ({:.2}× echo)",
            t[i],
            t[0],
            t[i] - t[0],
            t[i] / t[0]
        );
    }
    println!("claims from the host ÷ in the guest: {:.2}", t[2] / t[1]);
    println!("the whole HS256 token checked natively, as the host does: {:.2}", t[3]);
}
