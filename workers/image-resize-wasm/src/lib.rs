//! `image-resize-wasm`: the image-resize workload in pure Rust inside Wasm, the option for a
//! gateway without the host image capability (`workers/image-resize` uses it). POST a JPEG, get
//! it back downscaled (640×480 by default) and re-encoded as a baseline JPEG.
//!
//! ```text
//!  JPEG ─▶ zune-jpeg (RGBA) ─▶ resize (triangle filter, wasm SIMD) ─▶ jpeg-encoder ─▶ JPEG
//! ```
//!
//! Pure Rust, no host calls besides reading the request: the work is all the guest's own, which
//! is what the workload measures. A 2-megapixel picture decodes to 8 MB of RGBA, so this worker
//! needs a memory limit well above the 2 MiB default (the demo gives it 32 MiB).
//!
//! | answer | when |
//! |---|---|
//! | 200 `image/jpeg` | the picture, resized to exactly `width`×`height` (the aspect ratio is not kept) |
//! | 400 `invalid_image` | the body is not a JPEG this decoder reads |
//! | 405 | not a POST |
//! | 413 `image_too_large` | the picture has more than `max_pixels` pixels |
//!
//! Configuration (`[workers.NAME.config]`, all optional):
//!
//! | key | default | meaning |
//! |---|---|---|
//! | `width`, `height` | `640`, `480` | the size of the answer, 1 to 4096 |
//! | `quality` | `80` | JPEG quality, 1 to 100 |
//! | `max_pixels` | `4194304` | the largest picture (width × height) accepted |
//!
//! ```text
//! edgegate bench --write-image photo.jpg          # the lab's 1600×1200 test picture
//! curl --data-binary @photo.jpg localhost:8080/resize -o small.jpg
//! ```

#![cfg_attr(target_arch = "wasm32", no_std)]

extern crate alloc;

use alloc::vec::Vec;

pub mod resize;

use edgegate_sdk::host::Config;
use edgegate_sdk::{Request, Response};
use zune_jpeg::JpegDecoder;
use zune_jpeg::zune_core::bytestream::ZCursor;
use zune_jpeg::zune_core::colorspace::ColorSpace;
use zune_jpeg::zune_core::options::DecoderOptions;

/// What to produce.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Target {
    /// Width of the answer, in pixels.
    pub width: u16,
    /// Height of the answer, in pixels.
    pub height: u16,
    /// JPEG quality, 1 to 100.
    pub quality: u8,
    /// The largest input (width × height) accepted.
    pub max_pixels: u64,
}

impl Default for Target {
    fn default() -> Self {
        Self { width: 640, height: 480, quality: 80, max_pixels: 4 << 20 }
    }
}

impl Target {
    /// The defaults, overridden by the worker's configuration; a value out of range keeps the
    /// default.
    fn from_config(config: &Config) -> Self {
        let mut target = Self::default();
        for (key, value) in config.iter() {
            match key {
                "width" => target.width = dimension(value).unwrap_or(target.width),
                "height" => target.height = dimension(value).unwrap_or(target.height),
                "quality" => {
                    target.quality =
                        value.parse().ok().filter(|q| (1..=100).contains(q)).unwrap_or(80)
                }
                "max_pixels" => target.max_pixels = value.parse().unwrap_or(target.max_pixels),
                _ => {}
            }
        }
        target
    }
}

fn dimension(value: &str) -> Option<u16> {
    value.parse().ok().filter(|d| (1..=4096).contains(d))
}

/// Why a picture was not resized.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Error {
    /// Not a JPEG the decoder reads (or a corrupt one).
    InvalidImage,
    /// More pixels than [`Target::max_pixels`].
    TooLarge,
    /// The encoder failed (it does not, for sizes a [`Target`] allows).
    Encode,
}

/// Decodes `jpeg`, resizes it to `target` with a bilinear filter, and encodes the result.
pub fn resize_jpeg(jpeg: &[u8], target: &Target) -> Result<Vec<u8>, Error> {
    let options = DecoderOptions::default()
        .jpeg_set_out_colorspace(ColorSpace::RGBA)
        .set_max_width(1 << 16)
        .set_max_height(1 << 16);
    let mut decoder = JpegDecoder::new_with_options(ZCursor::new(jpeg), options);
    decoder.decode_headers().map_err(|_| Error::InvalidImage)?;
    let info = decoder.info().ok_or(Error::InvalidImage)?;
    let (width, height) = (usize::from(info.width), usize::from(info.height));
    // Checked before anything is allocated: a small file can declare a huge picture.
    if u64::from(info.width) * u64::from(info.height) > target.max_pixels {
        return Err(Error::TooLarge);
    }
    let pixels = decoder.decode().map_err(|_| Error::InvalidImage)?;
    let size = (usize::from(target.width), usize::from(target.height));
    let small = resize::resize(pixels, (width, height), size).ok_or(Error::InvalidImage)?;
    let mut out = Vec::with_capacity(64 << 10);
    jpeg_encoder::Encoder::new(&mut out, target.quality)
        .encode(&small, target.width, target.height, jpeg_encoder::ColorType::Rgba)
        .map_err(|_| Error::Encode)?;
    Ok(out)
}

/// Resizes the JPEG in the body.
pub fn handle(req: &Request) -> Response {
    if req.method() != "POST" {
        return Response::method_not_allowed("POST");
    }
    let target = Target::from_config(&Config::load());
    match resize_jpeg(req.body(), &target) {
        Ok(jpeg) => Response::builder(200).header("content-type", "image/jpeg").body(jpeg),
        Err(Error::InvalidImage) => Response::json(400, br#"{"error":"invalid_image"}"#),
        Err(Error::TooLarge) => Response::json(413, br#"{"error":"image_too_large"}"#),
        Err(Error::Encode) => Response::json(500, br#"{"error":"encode_failed"}"#),
    }
}

edgegate_sdk::export!(handle);

#[cfg(test)]
mod tests {
    use super::*;
    use edgegate_sdk::testing::TestRequest;

    /// A `width`×`height` JPEG of a gradient.
    fn jpeg(width: u16, height: u16) -> Vec<u8> {
        let mut rgb = Vec::new();
        for y in 0..height {
            for x in 0..width {
                rgb.extend_from_slice(&[(x % 256) as u8, (y % 256) as u8, 128]);
            }
        }
        let mut out = Vec::new();
        jpeg_encoder::Encoder::new(&mut out, 90)
            .encode(&rgb, width, height, jpeg_encoder::ColorType::Rgb)
            .unwrap();
        out
    }

    fn size_of(jpeg: &[u8]) -> (usize, usize) {
        let mut decoder = JpegDecoder::new(ZCursor::new(jpeg));
        decoder.decode_headers().unwrap();
        decoder.dimensions().unwrap()
    }

    #[test]
    fn resizes_to_the_target_size() {
        let out = resize_jpeg(&jpeg(320, 200), &Target::default()).unwrap();
        assert_eq!(size_of(&out), (640, 480));
        let small = Target { width: 32, height: 24, ..Target::default() };
        assert_eq!(size_of(&resize_jpeg(&jpeg(320, 200), &small).unwrap()), (32, 24));
    }

    #[test]
    fn the_picture_survives_the_resize() {
        // A gradient stays a gradient: the left edge dark in red, the right edge bright.
        let target = Target { width: 64, height: 48, ..Target::default() };
        let out = resize_jpeg(&jpeg(256, 192), &target).unwrap();
        let mut decoder = JpegDecoder::new(ZCursor::new(&out));
        let rgb = decoder.decode().unwrap();
        let red = |x: usize, y: usize| rgb[(y * 64 + x) * 3];
        assert!(red(1, 24) < 40, "left {}", red(1, 24));
        assert!(red(62, 24) > 215, "right {}", red(62, 24));
    }

    #[test]
    fn bad_input_gets_a_status_not_a_panic() {
        let post = |body: &[u8]| handle(&TestRequest::new("POST", "/resize").body(body).request());
        assert_eq!(post(b"").status(), 400);
        assert_eq!(post(b"GIF89a not a jpeg").status(), 400);
        let mut truncated = jpeg(64, 64);
        truncated.truncate(truncated.len() / 3);
        assert_eq!(post(&truncated).status(), 400);
        assert_eq!(handle(&TestRequest::new("GET", "/resize").request()).status(), 405);
    }

    #[test]
    fn a_picture_over_max_pixels_is_refused_before_decoding() {
        let target = Target { max_pixels: 100 * 100, ..Target::default() };
        assert_eq!(resize_jpeg(&jpeg(101, 100), &target), Err(Error::TooLarge));
        assert!(resize_jpeg(&jpeg(100, 100), &target).is_ok());
    }
}
