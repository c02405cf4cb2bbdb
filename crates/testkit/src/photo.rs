//! The test picture: the image-resize input of the tests, the runtime's benches and the lab.

/// Its width and height.
pub const SIZE: (u16, u16) = (1600, 1200);

/// The picture: 1600×1200 (gradients, rings and a little noise, so it
/// compresses like a photo rather than like a flat colour), as a quality-85 JPEG.
pub fn jpeg() -> Vec<u8> {
    let (w, h) = SIZE;
    let mut rgb = Vec::with_capacity(usize::from(w) * usize::from(h) * 3);
    let mut seed = 0x9E37_79B9_7F4A_7C15u64;
    for y in 0..h {
        for x in 0..w {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            let noise = (seed % 24) as f32 - 12.0;
            let (fx, fy) = (f32::from(x) / f32::from(w), f32::from(y) / f32::from(h));
            let d = ((fx - 0.6).powi(2) + (fy - 0.4).powi(2)).sqrt();
            let ring = (d * 40.0).sin() * 40.0;
            let px = |v: f32| (v + noise).clamp(0.0, 255.0) as u8;
            rgb.extend_from_slice(&[
                px(fx * 200.0 + ring),
                px(fy * 180.0 + 30.0),
                px((1.0 - fx) * 150.0 + ring * 0.5),
            ]);
        }
    }
    let mut out = Vec::new();
    jpeg_encoder::Encoder::new(&mut out, 85)
        .encode(&rgb, w, h, jpeg_encoder::ColorType::Rgb)
        .expect("a 1600×1200 RGB image encodes");
    out
}
