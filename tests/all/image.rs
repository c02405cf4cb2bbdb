//! The image capability through the binary: the demo's `image-resize` worker (native work in
//! the host) and `image-resize-wasm` (pure Rust in Wasm), bad pictures, and a decompression
//! bomb, which must be refused before the gateway allocates for it.

use edgegate_bench::workload::{Expect, RESIZED};
use edgegate_testkit::photo;

use crate::support::{Gateway, post};

/// The gateway's peak resident memory, in KiB.
fn peak_rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status.lines().find(|l| l.starts_with("VmHWM:")).expect("VmHWM in /proc/PID/status");
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

/// `jpeg` with its frame header claiming `w`×`h`.
fn claiming(jpeg: &[u8], w: u16, h: u16) -> Vec<u8> {
    let mut out = jpeg.to_vec();
    let sof = out.windows(2).position(|m| m == [0xff, 0xc0]).expect("a baseline JPEG");
    out[sof + 5..sof + 7].copy_from_slice(&h.to_be_bytes());
    out[sof + 7..sof + 9].copy_from_slice(&w.to_be_bytes());
    out
}

#[test]
fn both_image_workers_pass_the_lab_s_answer_check() {
    let gw = Gateway::demo(&[]);
    let jpeg = photo::jpeg();
    let expect = Expect::Jpeg(RESIZED.0, RESIZED.1);
    for path in ["/resize", "/resize-wasm"] {
        let reply = post(gw.addr, path, &jpeg);
        assert_eq!(reply.header("content-type"), Some("image/jpeg"), "{path}");
        expect.check(reply.status, &reply.body).unwrap_or_else(|e| panic!("{path}: {e}"));
    }
}

#[test]
fn bad_pictures_get_400_and_a_bomb_gets_413_without_memory() {
    let gw = Gateway::demo(&[]);
    let jpeg = photo::jpeg();
    let mut corrupt = jpeg.to_vec();
    let middle = corrupt.len() / 2;
    corrupt[middle..middle + 256].fill(0xff);
    for (name, body) in [
        ("truncated", &jpeg[..jpeg.len() / 2]),
        ("corrupt", &corrupt[..]),
        ("not a JPEG", &b"\x89PNG\r\n\x1a\n not really"[..]),
    ] {
        let reply = post(gw.addr, "/resize", body);
        assert_eq!((reply.status, reply.error().as_str()), (400, "invalid_image"), "{name}");
    }
    // Warm up first, so that the peak below is the steady one.
    assert_eq!(post(gw.addr, "/resize", &jpeg).status, 200);
    let before = peak_rss_kib(gw.pid());
    // 65000×65000 would be 16 GiB of pixels; the header alone is refused.
    let bomb = claiming(&jpeg, 65_000, 65_000);
    let reply = post(gw.addr, "/resize", &bomb);
    assert_eq!((reply.status, reply.error().as_str()), (413, "image_too_large"));
    let grown = peak_rss_kib(gw.pid()) - before;
    assert!(grown < 16 << 10, "the peak RSS grew by {grown} KiB for a refused bomb");
    assert_eq!(post(gw.addr, "/resize", &jpeg).status, 200, "still serving");
}

/// The outside test's progressive scan bombs (883 valid scans over 6320×6320; and 100
/// scans, within the scan limit, whose decoding alone outlasts the 250 ms budget) are refused
/// before a thread decodes them, so two of them at once leave the image threads free: a
/// normal picture sent with them is served.
#[test]
fn progressive_scan_bombs_are_refused_and_hold_no_image_thread() {
    let gw = Gateway::demo(&[]);
    let jpeg = photo::jpeg();
    let bombs = [
        edgegate_testkit::jpeg::progressive(6320, 6320, false, 883),
        edgegate_testkit::jpeg::progressive(6320, 6320, false, 100),
    ];
    let addr = gw.addr;
    let sent: Vec<_> = bombs
        .iter()
        .cloned()
        .map(|bomb| std::thread::spawn(move || post(addr, "/resize", &bomb)))
        .collect();
    let normal = post(gw.addr, "/resize", &jpeg);
    assert_eq!(normal.status, 200, "{}", normal.text());
    for reply in sent {
        let reply = reply.join().unwrap();
        assert_eq!((reply.status, reply.error().as_str()), (413, "image_too_large"));
    }
}
