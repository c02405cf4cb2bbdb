//! The bundled demo, started with no configuration at all.

use crate::support::{Gateway, get, http, post};

/// About 1 KB of JSON, like the static-json workload.
fn payload() -> String {
    let items: Vec<String> = (0..20)
        .map(|i| {
            format!(r#"{{"id":{i},"name":"item-{i}","tags":["a","b"],"price":{i}.5,"ok":true}}"#)
        })
        .collect();
    format!(r#"{{"items":[{}],"note":"caf\u00e9","empty":{{}}}}"#, items.join(","))
}

#[test]
fn echo_round_trips_json_and_rejects_invalid_json() {
    let mut gw = Gateway::demo(&[]);
    let body = payload();
    assert!((900..1500).contains(&body.len()), "about 1 KB: {}", body.len());

    let reply = post(gw.addr, "/echo", body.as_bytes());
    assert_eq!(reply.status, 200, "{}", reply.text());
    assert_eq!(reply.header("content-type"), Some("application/json"));
    assert_eq!(reply.json(), serde_json::from_str::<serde_json::Value>(&body).unwrap());
    assert!(!reply.text().contains(' '), "re-serialized compactly");
    assert_eq!(reply.header("x-request-id").map(str::len), Some(16));

    let bad = post(gw.addr, "/echo", b"{\"a\": }");
    assert_eq!(bad.status, 400);
    assert_eq!(bad.error(), "invalid_json");

    assert_eq!(get(gw.addr, "/echo").status, 405);
    assert_eq!(get(gw.addr, "/nowhere").error(), "no_route");
    assert_eq!(get(gw.admin, "/healthz").json()["status"], "ok");

    let (status, stderr) = gw.stop();
    assert!(status.success(), "{status}: {stderr}");
    // One access line per request, naming route, worker, status and duration.
    let access: Vec<&str> = stderr.lines().filter(|l| l.contains("edgegate::access")).collect();
    assert_eq!(access.len(), 4, "{stderr}");
    assert!(
        access[0].contains("route=\"echo\"") && access[0].contains("worker=\"echo-json\""),
        "{}",
        access[0]
    );
    assert!(
        access[0].contains("status=200") && access[0].contains("duration_us="),
        "{}",
        access[0]
    );
    assert!(
        access[3].contains("status=404") && access[3].contains("source=\"client\""),
        "{}",
        access[3]
    );
}

#[test]
fn h2c_and_http1_share_one_port() {
    let gw = Gateway::demo(&[]);
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let (status, body) = runtime.block_on(async {
        use http_body_util::BodyExt;
        let stream = tokio::net::TcpStream::connect(gw.addr).await.unwrap();
        let (mut sender, connection) = hyper::client::conn::http2::handshake(
            hyper_util::rt::TokioExecutor::new(),
            hyper_util::rt::TokioIo::new(stream),
        )
        .await
        .unwrap();
        tokio::spawn(connection);
        let request = hyper::Request::post(format!("http://{}/echo", gw.addr))
            .body(http_body_util::Full::new(bytes::Bytes::from_static(b"[1, 2]")))
            .unwrap();
        let response = sender.send_request(request).await.unwrap();
        let status = response.status();
        (status, response.into_body().collect().await.unwrap().to_bytes())
    });
    assert_eq!(status, 200);
    assert_eq!(&body[..], b"[1,2]");
    assert_eq!(http(gw.addr, "POST", "/echo", &[], b"[3]").text(), "[3]");
}

#[test]
fn edgegate_log_filters_the_log() {
    let mut gw = Gateway::demo(&[("EDGEGATE_LOG", "warn")]);
    assert_eq!(post(gw.addr, "/echo", b"{}").status, 200);
    let (_, stderr) = gw.stop();
    assert!(!stderr.contains("edgegate::access"), "info lines filtered out: {stderr}");
}
