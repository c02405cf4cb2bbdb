use std::time::{Duration, Instant};

use super::*;

/// The colour of the test picture at `(x, y)` of a `w`×`h` picture: smooth gradients, so any
/// resampling filter lands near the value at the output pixel's centre.
fn gradient(x: f64, y: f64, w: f64, h: f64) -> [f64; 3] {
    [x / w * 255.0, y / h * 255.0, 128.0 + 60.0 * ((x + y) / (w + h) - 0.5)]
}

/// A `w`×`h` JPEG of [`gradient`], quality 95.
fn picture(w: u32, h: u32) -> Vec<u8> {
    let rgba: Vec<u8> = (0..h)
        .flat_map(|y| (0..w).map(move |x| (x, y)))
        .flat_map(|(x, y)| {
            let [r, g, b] = gradient(f64::from(x) + 0.5, f64::from(y) + 0.5, w.into(), h.into());
            [r as u8, g as u8, b as u8, 255]
        })
        .collect();
    codec::encode(&Pixels { width: w, height: h, rgba }, Format::Jpeg, 95).unwrap()
}

/// `jpeg` with an EXIF segment saying `orientation`, right after its SOI marker.
fn with_orientation(jpeg: &[u8], orientation: u16) -> Vec<u8> {
    let mut tiff = b"II*\0\x08\0\0\0\x01\0".to_vec();
    tiff.extend_from_slice(&0x0112u16.to_le_bytes()); // the Orientation tag
    tiff.extend_from_slice(&3u16.to_le_bytes()); // SHORT
    tiff.extend_from_slice(&1u32.to_le_bytes());
    tiff.extend_from_slice(&orientation.to_le_bytes());
    tiff.extend_from_slice(&[0, 0, 0, 0, 0, 0]); // value padding, then no next IFD
    let mut app1 = b"Exif\0\0".to_vec();
    app1.extend_from_slice(&tiff);
    let mut out = jpeg[..2].to_vec();
    out.extend_from_slice(&[0xff, 0xe1]);
    out.extend_from_slice(&(app1.len() as u16 + 2).to_be_bytes());
    out.extend_from_slice(&app1);
    out.extend_from_slice(&jpeg[2..]);
    out
}

/// `jpeg` with its frame header claiming `w`×`h`.
fn claiming(jpeg: &[u8], w: u16, h: u16) -> Vec<u8> {
    let mut out = jpeg.to_vec();
    let sof = out.windows(2).position(|m| m == [0xff, 0xc0]).expect("a baseline JPEG");
    out[sof + 5..sof + 7].copy_from_slice(&h.to_be_bytes());
    out[sof + 7..sof + 9].copy_from_slice(&w.to_be_bytes());
    out
}

fn budget() -> Budget {
    Budget { cpu: Duration::from_secs(10), deadline: Instant::now() + Duration::from_secs(60) }
}

fn run(jpeg: &[u8], spec: TransformSpec) -> Result<Output, Error> {
    transform(jpeg, &spec, &Limits::default(), &budget()).0
}

fn decoded(out: &Output) -> Pixels {
    assert_eq!(out.format, Format::Jpeg);
    let (w, h) = codec::jpeg_size(&out.bytes).unwrap();
    assert_eq!((w, h), (out.width, out.height), "the header says the size reported");
    codec::decode_jpeg(&out.bytes, (w, h)).unwrap()
}

/// The mean and largest difference, per channel, between `pixels` and `expected(x, y)` over
/// the output pixels `area` says.
fn error(
    pixels: &Pixels,
    area: impl Fn(u32, u32) -> bool,
    expected: impl Fn(f64, f64) -> [f64; 3],
) -> (f64, f64) {
    let (mut sum, mut max, mut n) = (0.0, 0.0f64, 0.0);
    for y in 0..pixels.height {
        for x in 0..pixels.width {
            if !area(x, y) {
                continue;
            }
            let i = ((y * pixels.width + x) * 4) as usize;
            let want = expected(f64::from(x) + 0.5, f64::from(y) + 0.5);
            for (got, want) in pixels.rgba[i..i + 3].iter().zip(want) {
                let d = (f64::from(*got) - want).abs();
                sum += d;
                max = max.max(d);
                n += 1.0;
            }
        }
    }
    (sum / n, max)
}

fn assert_close((mean, max): (f64, f64)) {
    assert!(mean < 2.5 && max < 16.0, "mean error {mean:.2}, largest {max:.0}");
}

#[test]
fn fill_resizes_to_exactly_the_box_and_keeps_the_pixels() {
    let out =
        run(&picture(800, 600), TransformSpec { width: 200, height: 100, ..Default::default() })
            .unwrap();
    let px = decoded(&out);
    assert_eq!((px.width, px.height), (200, 100));
    // Output (x, y) shows source (4x, 6y): stretched.
    assert_close(error(&px, |_, _| true, |x, y| gradient(x * 4.0, y * 6.0, 800.0, 600.0)));
}

#[test]
fn the_reference_check_fails_for_a_wrong_picture() {
    // The tolerance is not so loose that a mirrored picture passes.
    let out =
        run(&picture(800, 600), TransformSpec { width: 200, height: 150, ..Default::default() })
            .unwrap();
    let (mean, _) =
        error(&decoded(&out), |_, _| true, |x, y| gradient(800.0 - x * 4.0, y * 4.0, 800.0, 600.0));
    assert!(mean > 10.0, "{mean}");
}

#[test]
fn contain_letterboxes_on_the_background() {
    let spec = TransformSpec {
        width: 300,
        height: 300,
        fit: Fit::Contain,
        background: 0xffff_ffff,
        ..Default::default()
    };
    let px = decoded(&run(&picture(800, 600), spec).unwrap());
    assert_eq!((px.width, px.height), (300, 300));
    // 800×600 fits as 300×225, centred: bars of 37 and 38 rows.
    let bar = |_, y| !(35..265).contains(&y);
    assert_close(error(&px, bar, |_, _| [255.0; 3]));
    let inside = |_, y| (40..260).contains(&y);
    let scale = 800.0 / 300.0;
    assert_close(error(&px, inside, |x, y| gradient(x * scale, (y - 37.0) * scale, 800.0, 600.0)));
}

#[test]
fn cover_fills_the_box_and_cuts_the_overflow_evenly() {
    let spec = TransformSpec { width: 300, height: 300, fit: Fit::Cover, ..Default::default() };
    let px = decoded(&run(&picture(800, 600), spec).unwrap());
    assert_eq!((px.width, px.height), (300, 300));
    // The middle 600×600 of the source, at 2×.
    assert_close(error(&px, |_, _| true, |x, y| gradient(100.0 + x * 2.0, y * 2.0, 800.0, 600.0)));
}

#[test]
fn one_side_given_keeps_the_aspect_ratio() {
    let out = run(&picture(800, 600), TransformSpec { width: 400, ..Default::default() }).unwrap();
    assert_eq!((out.width, out.height), (400, 300));
    let out = run(&picture(800, 600), TransformSpec { height: 150, ..Default::default() }).unwrap();
    assert_eq!((out.width, out.height), (200, 150));
}

#[test]
fn crop_cuts_before_the_resize() {
    let crop = Some(Rect { x: 400, y: 300, width: 400, height: 300 });
    let spec = TransformSpec { width: 200, height: 150, crop, ..Default::default() };
    let px = decoded(&run(&picture(800, 600), spec).unwrap());
    assert_close(error(
        &px,
        |_, _| true,
        |x, y| gradient(400.0 + x * 2.0, 300.0 + y * 2.0, 800.0, 600.0),
    ));
    let outside =
        TransformSpec { crop: Some(Rect { x: 700, y: 0, width: 200, height: 10 }), ..spec };
    assert!(matches!(run(&picture(800, 600), outside), Err(Error::BadCrop(..))));
}

#[test]
fn exif_orientation_turns_the_picture_upright_unless_asked_not_to() {
    let jpeg = with_orientation(&picture(400, 200), 6);
    let info = probe(&jpeg).unwrap();
    assert_eq!((info.width, info.height, info.orientation), (400, 200, 6));
    let upright =
        run(&jpeg, TransformSpec { width: 100, height: 200, ..Default::default() }).unwrap();
    let px = decoded(&upright);
    assert_eq!((px.width, px.height), (100, 200));
    // Rotated 90° clockwise: displayed (x, y) shows stored (y, 200 - x), at 2×.
    assert_close(error(&px, |_, _| true, |x, y| gradient(y * 2.0, 200.0 - x * 2.0, 400.0, 200.0)));
    let spec = TransformSpec { width: 200, height: 100, orient: false, ..Default::default() };
    let stored = run(&jpeg, spec).unwrap();
    assert_eq!((stored.width, stored.height), (200, 100));
}

#[test]
fn shrink_on_load_picks_the_largest_factor_that_keeps_the_size() {
    let info = ImageInfo { format: Format::Jpeg, width: 1600, height: 1200, orientation: 1 };
    let plan = |width, height| {
        Plan::new(&info, &TransformSpec { width, height, ..Default::default() }, &Limits::default())
            .unwrap()
    };
    assert_eq!((plan(640, 480).shrink, plan(640, 480).decoded), (2, (800, 600)));
    assert_eq!((plan(100, 75).shrink, plan(100, 75).decoded), (8, (200, 150)));
    assert_eq!(plan(1600, 1200).shrink, 1);
    assert_eq!(plan(1601, 1200).shrink, 1, "an upscale decodes whole");
}

#[test]
fn png_out_has_the_size_and_the_pixels() {
    let spec = TransformSpec { width: 100, height: 75, format: Format::Png, ..Default::default() };
    let out = run(&picture(800, 600), spec).unwrap();
    assert_eq!(out.format, Format::Png);
    let mut reader = png::Decoder::new(std::io::Cursor::new(&out.bytes)).read_info().unwrap();
    let mut rgba = vec![0; reader.output_buffer_size().unwrap()];
    let frame = reader.next_frame(&mut rgba).unwrap();
    assert_eq!((frame.width, frame.height), (100, 75));
    let px = Pixels { width: 100, height: 75, rgba };
    assert_close(error(&px, |_, _| true, |x, y| gradient(x * 8.0, y * 8.0, 800.0, 600.0)));
}

#[test]
fn corrupt_truncated_and_other_bytes_are_invalid() {
    let jpeg = picture(320, 240);
    let spec = TransformSpec { width: 32, height: 24, ..Default::default() };
    let mut corrupt = jpeg.clone();
    let middle = corrupt.len() / 2;
    corrupt[middle..middle + 64].fill(0xff);
    for (name, bytes) in [
        ("truncated", &jpeg[..jpeg.len() / 2]),
        ("corrupt", &corrupt[..]),
        ("png", &b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR"[..]),
        ("text", b"hello"),
        ("empty", b""),
    ] {
        assert!(matches!(run(bytes, spec), Err(Error::Invalid(_))), "{name}");
    }
    assert!(matches!(probe(b"GIF89a"), Err(Error::Invalid(_))));
}

#[test]
fn a_bomb_is_refused_from_its_header() {
    let bomb = claiming(&picture(16, 16), 65_000, 65_000);
    assert_eq!(probe(&bomb).map(|i| (i.width, i.height)), Ok((65_000, 65_000)));
    let (result, cpu) = transform(&bomb, &TransformSpec::default(), &Limits::default(), &budget());
    assert!(matches!(result, Err(Error::TooManyPixels { width: 65_000, .. })), "{result:?}");
    assert!(cpu < Duration::from_millis(50), "nothing was decoded: {cpu:?}");
    // An output that large is refused the same way.
    let huge = TransformSpec { width: 60_000, height: 60_000, ..Default::default() };
    assert!(matches!(run(&picture(16, 16), huge), Err(Error::TooManyPixels { .. })));
}

#[test]
fn budgets_and_output_caps_hold() {
    let jpeg = picture(800, 600);
    let spec = TransformSpec { width: 400, height: 300, ..Default::default() };
    // Too little for even the decoding's floor: refused before it starts.
    let tight = Budget { cpu: Duration::from_micros(1), ..budget() };
    let (result, _) = transform(&jpeg, &spec, &Limits::default(), &tight);
    assert!(matches!(result, Err(Error::TooMuchWork { .. })), "{result:?}");
    let late = Budget { deadline: Instant::now(), ..budget() };
    let (result, _) = transform(&jpeg, &spec, &Limits::default(), &late);
    assert!(matches!(result, Err(Error::TooMuchWork { left: Duration::ZERO, .. })), "{result:?}");
    // Enough for the floor, not for the work: stopped after the decode.
    let plan = Plan::of(&jpeg, &spec, &Limits::default()).unwrap();
    let floor = Budget { cpu: plan.least_decode_time() + Duration::from_micros(10), ..budget() };
    let (result, cpu) = transform(&jpeg, &spec, &Limits::default(), &floor);
    assert!(matches!(result, Err(Error::OverBudget { .. })), "{result:?}");
    assert!(cpu > Duration::ZERO);
    let small = Limits { max_output: 100, ..Limits::default() };
    let (result, _) = transform(&jpeg, &spec, &small, &budget());
    assert!(matches!(result, Err(Error::OutputTooLarge { limit: 100, .. })), "{result:?}");
}

#[test]
fn memory_is_known_before_decoding() {
    let info = ImageInfo { format: Format::Jpeg, width: 1600, height: 1200, orientation: 1 };
    let spec = TransformSpec { width: 640, height: 480, ..Default::default() };
    let plan = Plan::new(&info, &spec, &Limits::default()).unwrap();
    assert_eq!(plan.memory(), 800 * 600 * 4 + 640 * 480 * 4 * 4);
}

#[test]
fn a_progressive_picture_within_the_scan_limit_decodes() {
    use edgegate_testkit::jpeg::progressive;
    for color in [false, true] {
        let jpeg = progressive(640, 480, color, 100);
        let out = run(&jpeg, TransformSpec { width: 64, height: 48, ..Default::default() });
        let px = decoded(&out.unwrap_or_else(|e| panic!("color {color}: {e}")));
        assert_eq!((px.width, px.height), (64, 48));
        // Every coefficient is zero: a flat mid-grey.
        assert!(px.rgba.chunks_exact(4).all(|p| p[..3].iter().all(|&c| c.abs_diff(128) <= 1)));
    }
}

#[test]
fn a_scan_bomb_is_refused_before_it_is_decoded() {
    use edgegate_testkit::jpeg::progressive;
    // The outside test's picture: 6320×6320 grey, 883 valid scans.
    let bomb = progressive(6320, 6320, false, 883);
    let spec = TransformSpec { width: 640, height: 480, ..Default::default() };
    let (result, cpu) = transform(&bomb, &spec, &Limits::default(), &budget());
    assert_eq!(result, Err(Error::TooManyScans { limit: 100, progressive: true }));
    assert!(cpu < Duration::from_millis(50), "nothing was decoded: {cpu:?}");
    // Within the scan limit, its coefficients are in the plan's memory: 790×790 blocks of
    // 64 two-byte coefficients, on top of the pixels.
    let within = progressive(6320, 6320, false, 100);
    let plan = Plan::of(&within, &spec, &Limits::default()).unwrap();
    assert_eq!(plan.coefficients, 790 * 790 * 128);
    assert!(plan.memory() > 790 * 790 * 128);
    // Its 100 scans of 624,100 blocks take at least 1.2 s to decode (2.9 s here): more than
    // a request's budget of 250 ms, so refused before a thread starts on it.
    assert_eq!(plan.block_scans, 100 * 790 * 790);
    let quarter = Budget { cpu: Duration::from_millis(250), ..budget() };
    let (result, cpu) = transform(&within, &spec, &Limits::default(), &quarter);
    assert!(matches!(result, Err(Error::TooMuchWork { .. })), "{result:?}");
    assert!(cpu < Duration::from_millis(50), "nothing was decoded: {cpu:?}");
    let baseline = picture(64, 48);
    assert_eq!(Plan::of(&baseline, &spec, &Limits::default()).unwrap().coefficients, 0);
}
