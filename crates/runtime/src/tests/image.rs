//! The image capability through a real worker (`image-resize`): the result as a blob response,
//! the grant, and every limit the host holds a transform to.

use std::sync::OnceLock;

use bytes::Bytes;

use super::*;

fn picture() -> Bytes {
    static PICTURE: OnceLock<Bytes> = OnceLock::new();
    PICTURE.get_or_init(|| Bytes::from(edgegate_testkit::photo::jpeg())).clone()
}

fn resizer(limits: Limits, image: Option<ImageGrant>) -> Worker {
    runtime()
        .load(WorkerSpec {
            name: "image-resize",
            source: crate::Source::Bytes(bytes::Bytes::copy_from_slice(guests::IMAGE_RESIZE)),
            native_code: false,
            limits,
            config: BTreeMap::new(),
            keys: None,
            kv: Vec::new(),
            fetcher: None,
            image,
        })
        .unwrap()
}

fn roomy() -> Limits {
    Limits { cpu: Duration::from_secs(2), deadline: Duration::from_secs(10), ..Limits::default() }
}

fn post(body: Bytes) -> GuestRequest {
    GuestRequest {
        method: http::Method::POST,
        uri: "/resize".parse().unwrap(),
        body,
        ..GuestRequest::default()
    }
}

/// A baseline JPEG's size, from its frame header.
fn jpeg_size(jpeg: &[u8]) -> (u16, u16) {
    let sof = jpeg.windows(2).position(|m| m == [0xff, 0xc0]).expect("a baseline JPEG");
    let be = |at: usize| u16::from_be_bytes([jpeg[at], jpeg[at + 1]]);
    (be(sof + 7), be(sof + 5))
}

#[tokio::test]
async fn the_worker_answers_with_the_host_s_picture_and_pays_its_cpu() {
    let worker = resizer(roomy(), Some(ImageGrant::default()));
    let (outcome, usage) = worker.handle_measured(post(picture()), RequestId(1)).await;
    let Ok(GuestOutcome::Response(response)) = outcome else { panic!("{outcome:?}") };
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["content-type"], "image/jpeg");
    assert_eq!(jpeg_size(response.body()), (640, 480));
    // The transform ran on another thread, and its CPU time is the request's.
    assert!(usage.cpu > Duration::from_millis(2), "{usage:?}");
    // The picture never entered the guest: its memory stayed at the module's own.
    assert!(usage.memory_peak < 1 << 20, "{usage:?}");
}

#[tokio::test]
async fn a_worker_without_the_grant_gets_not_granted() {
    let worker = resizer(roomy(), None);
    let response = response(&worker, post(picture())).await;
    assert_eq!(response.status(), 500);
    assert_eq!(response.body(), r#"{"error":"image_not_granted"}"#);
}

#[tokio::test]
async fn bad_pictures_and_bombs_are_refused_with_their_codes() {
    let worker = resizer(roomy(), Some(ImageGrant::default()));
    let jpeg = picture();
    let truncated = jpeg.slice(..jpeg.len() / 3);
    for body in [truncated, Bytes::from_static(b"not a picture")] {
        let r = response(&worker, post(body)).await;
        assert_eq!(
            (r.status().as_u16(), &r.body()[..]),
            (400, &br#"{"error":"invalid_image"}"#[..])
        );
    }
    let small = ImageGrant {
        limits: edgegate_image::Limits { max_pixels: 1000, ..Default::default() },
        ..ImageGrant::default()
    };
    let r = response(&resizer(roomy(), Some(small)), post(jpeg.clone())).await;
    assert_eq!((r.status().as_u16(), &r.body()[..]), (413, &br#"{"error":"image_too_large"}"#[..]));
    // More image memory than the worker may hold: refused before anything is decoded.
    let tight = ImageGrant { memory: 1 << 20, ..ImageGrant::default() };
    let r = response(&resizer(roomy(), Some(tight)), post(jpeg)).await;
    assert_eq!(r.status(), 413);
}

#[tokio::test]
async fn a_transform_too_big_for_the_cpu_budget_ends_the_request() {
    // A progressive picture of 100 scans over 624,100 blocks: its decoding alone takes at
    // least 1.2 s (20 ns a block and scan; 2.9 s here). With 250 ms of budget it is refused
    // before a thread starts on it.
    let worker =
        resizer(Limits { cpu: Duration::from_millis(250), ..roomy() }, Some(ImageGrant::default()));
    let slow = edgegate_testkit::jpeg::progressive(6320, 6320, false, 100);
    let started = std::time::Instant::now();
    let r = response(&worker, post(slow.into())).await;
    assert_eq!((r.status().as_u16(), &r.body()[..]), (413, &br#"{"error":"image_too_large"}"#[..]));
    assert!(started.elapsed() < Duration::from_millis(500), "decoded: {:?}", started.elapsed());
    // The 2-megapixel picture with 3 ms: it starts (its floor, 0.9 ms, fits), and the budget
    // stops it after the decode (6 ms here).
    let worker =
        resizer(Limits { cpu: Duration::from_millis(3), ..roomy() }, Some(ImageGrant::default()));
    match worker.handle(post(picture()), RequestId(1)).await {
        Err(e) => assert_eq!(e.kind(), ExecErrorKind::CpuBudgetExceeded, "{e}"),
        Ok(outcome) => panic!("expected the CPU budget to stop it, got {outcome:?}"),
    }
}

#[tokio::test]
async fn a_guest_reads_the_held_body_by_pieces_and_answers_with_it_by_handle() {
    let body = Bytes::from_static(b"twenty-three bytes long");
    let request = GuestRequest { uri: "/blob".parse().unwrap(), body: body.clone(), ..post(body) };
    let r = response(&super::hostile(), request).await;
    assert_eq!(r.status(), 200, "{:?}", r.body());
    assert_eq!(r.headers()["x-blob-len"], "23");
    assert_eq!(r.body(), "twenty-three bytes long");
}
