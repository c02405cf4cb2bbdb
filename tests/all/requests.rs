//! What a request names, over real sockets: the `Host` rules of RFC 9112 §3.2, and path
//! normalization, so that a path-prefix route cannot be used to reach another route's
//! upstream path.

use crate::support::{Gateway, Origin, Reply, get, raw, runtime_section};

/// `/public` goes to an open worker that may forward to `origin`; `/hs` to a guarded one;
/// host `only.example` to a third. Each answers `/config?key=name` with its name.
fn config(origin: &Origin, server: &str) -> String {
    format!(
        r#"
        [server]
        {server}

        {runtime}
        [upstreams.origin]
        url = "http://{origin}"

        [workers.open]
        module = "{hostile}"
        upstreams = ["origin"]
        config = {{ name = "open" }}

        [workers.guarded]
        module = "{hostile}"
        config = {{ name = "guarded" }}

        [workers.only]
        module = "{hostile}"
        upstreams = ["origin"]
        config = {{ name = "only" }}

        [[routes]]
        prefix = "/public"
        worker = "open"

        [[routes]]
        prefix = "/hs"
        worker = "guarded"

        [[routes]]
        host = "only.example"
        prefix = "/"
        worker = "only"
        "#,
        runtime = runtime_section(),
        origin = origin.addr,
        hostile = edgegate_guests::HOSTILE,
    )
}

fn assert_refused(reply: &Reply, code: &str, what: &str) {
    assert_eq!((reply.status, reply.error().as_str()), (400, code), "{what}: {}", reply.text());
    assert_eq!(reply.json()["request_id"].as_str().map(str::len), Some(16), "{what}");
}

#[test]
fn host_headers_follow_rfc_9112() {
    let origin = Origin::start();
    let gw = Gateway::start(&config(&origin, ""));
    let pass = "/public/pass";
    for (request, what) in [
        (format!("GET {pass} HTTP/1.1\r\nConnection: close\r\n\r\n"), "no Host"),
        (format!("GET {pass} HTTP/1.1\r\nHost: a\r\nHost: b\r\nConnection: close\r\n\r\n"), "two"),
        (format!("GET {pass} HTTP/1.1\r\nHost: a/b@c\r\nConnection: close\r\n\r\n"), "a/b@c"),
        (format!("GET {pass} HTTP/1.1\r\nHost: a b\r\nConnection: close\r\n\r\n"), "a b"),
        (
            format!(
                "GET http://u@only.example{pass} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
            ),
            "userinfo in the target",
        ),
    ] {
        assert_refused(&raw(gw.addr, request.as_bytes()), "invalid_host", what);
    }
    assert!(origin.seen().is_empty(), "nothing refused was forwarded: {:?}", origin.seen());

    // HTTP/1.0 may omit Host.
    let old = raw(gw.addr, b"GET /public/config?key=name HTTP/1.0\r\n\r\n");
    assert_eq!((old.status, old.text().as_str()), (200, "open"));

    // Absolute form routes by its authority, and everything after sees that one host.
    let absolute = |path: &str| {
        let request = format!(
            "GET http://only.example{path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"
        );
        raw(gw.addr, request.as_bytes())
    };
    assert_eq!(absolute("/config?key=name").text(), "only");
    assert_eq!(absolute("/x/target").text(), "only.example /x/target");
    assert_eq!(absolute("/pass").status, 200);
    let seen = origin.seen();
    assert_eq!(seen.len(), 1, "{seen:?}");
    assert_eq!(seen[0].header("x-forwarded-host"), Some("only.example"));
}

#[test]
fn paths_are_normalized_before_routing_and_forwarding() {
    let origin = Origin::start();
    let gw = Gateway::start(&config(&origin, ""));
    let name = |path: &str| {
        let reply = get(gw.addr, path);
        assert_eq!(reply.status, 200, "{path}: {}", reply.text());
        reply.text()
    };
    // The bypasses the outside test found reach the guarded route, as the path says.
    assert_eq!(name("/public/../hs/config?key=name"), "guarded");
    assert_eq!(name("/public/%2e%2e/hs/config?key=name"), "guarded");
    assert_eq!(name("/public/%2E./hs//config?key=name"), "guarded");
    assert_eq!(name("/%70ublic/config?key=name"), "open", "an escaped letter is the letter");
    assert_eq!(get(gw.addr, "/public/..").status, 404, "that is `/`, which no route serves");
    assert_refused(&get(gw.addr, "/public/../../hs/pass"), "invalid_path", "above the root");
    assert_refused(&get(gw.addr, "/public/%2e%2e/%2e%2e/pass"), "invalid_path", "escaped, too");
    assert_refused(&get(gw.addr, "/public/a%2fb/pass"), "invalid_path", "an escaped slash");
    assert_refused(&get(gw.addr, "/public/a%5Cb/pass"), "invalid_path", "an escaped backslash");
    assert_refused(&get(gw.addr, "/public/a%zz/pass"), "invalid_path", "a broken escape");

    // The worker and the upstream get the normalized path; the query is left alone.
    assert_eq!(name("/public/a/./b/../target?q=%2e%2e/x"), "localhost /public/a/target?q=%2e%2e/x");
    assert_eq!(get(gw.addr, "/public/a//b/./../pass?x=1").status, 200);
    let seen: Vec<String> = origin.seen().iter().map(|s| s.request_line().to_owned()).collect();
    assert_eq!(seen, ["GET /public/a/pass?x=1 HTTP/1.1"]);
}

#[test]
fn path_rules_have_options() {
    let origin = Origin::start();
    let gw = Gateway::start(&config(&origin, "escaped_slashes = \"keep\"\nmerge_slashes = false"));
    assert_eq!(get(gw.addr, "/public/a%2fb//c/../pass").status, 200);
    let gw_off = Gateway::start(&config(&origin, "normalize_path = false"));
    // Off means exactly as received: the unsafe behaviour, for upstreams that need it.
    assert_eq!(get(gw_off.addr, "/public/../hs/pass").status, 200);
    let seen: Vec<String> = origin.seen().iter().map(|s| s.request_line().to_owned()).collect();
    assert_eq!(seen, ["GET /public/a%2Fb//pass HTTP/1.1", "GET /public/../hs/pass HTTP/1.1"]);
}
