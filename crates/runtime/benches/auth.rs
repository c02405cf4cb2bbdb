//! JWT verification, three ways, on the same tokens (signed with the RFC 7515 / RFC 8037 keys):
//!
//! * `verify-native/ALG`: `ring` alone, called directly, the key already parsed: the ceiling.
//! * `whole-in-host/ALG`: what `jwt_claims` does, natively: the bearer header found and the
//!   whole token checked by the SDK's `jwt::verify` over the key set, signature and claims.
//! * `host-path/ALG`: a guest (the hostile test program's `/verify`) takes the token apart and
//!   asks the host through `jws_verify`, in a fresh instance; `host-path/baseline` is the same
//!   request to `/ok`, so `host-path/ALG − host-path/baseline` is what verifying through the
//!   host costs, to compare with `verify-native/ALG`.
//! * `auth-router/ALG`: the whole gateway worker: instantiate, read the policy, verify the
//!   token through the host, check the claims, route on `aud`, build the forward directive.
//!   `auth-router/HS256 − echo-json/isolation` is what HS256 auth adds to a request.
//!   `auth-router/ALG/in-host` is the same worker with `verify_in = "host"`: the whole token
//!   checked by the host (`jwt_claims`), only the claims it reads coming back.
//!
//! The differences are small against this machine's drift between benchmarks; the
//! `auth_ratios` bench measures the same things interleaved, for the ratios.
//!
//! Run: `cargo bench -p edgegate-runtime --bench auth`

mod common;

use criterion::{Criterion, criterion_group, criterion_main};

fn bench(c: &mut Criterion) {
    let setup = common::Setup::new();
    let mut group = c.benchmark_group("verify-native");
    for signer in &setup.signers {
        let (input, sig) = common::split(&common::token(signer));
        let verify = common::native(signer);
        assert!(verify(&input, &sig));
        group.bench_function(signer.alg().name(), |b| b.iter(|| verify(&input, &sig)));
    }
    group.finish();

    let mut group = c.benchmark_group("whole-in-host");
    for signer in &setup.signers {
        let run = setup.whole_in_host(&common::token(signer));
        group.bench_function(signer.alg().name(), |b| b.iter(&run));
    }
    group.finish();

    let mut group = c.benchmark_group("host-path");
    let baseline = setup.baseline(&common::token(&setup.signers[1]));
    group.bench_function("baseline", |b| b.iter(&baseline));
    for signer in &setup.signers {
        let run = setup.host_path(&common::token(signer));
        group.bench_function(signer.alg().name(), |b| b.iter(&run));
    }
    group.finish();

    let echo = setup.echo_isolation();
    c.benchmark_group("echo-json").bench_function("isolation", |b| b.iter(&echo));

    let mut group = c.benchmark_group("auth-router");
    for signer in &setup.signers {
        let token = common::token(signer);
        let run = setup.auth_router(&token, false);
        group.bench_function(signer.alg().name(), |b| b.iter(&run));
        let run = setup.auth_router(&token, true);
        group.bench_function(format!("{}/in-host", signer.alg().name()), |b| b.iter(&run));
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
