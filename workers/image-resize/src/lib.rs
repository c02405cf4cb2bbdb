//! `image-resize`: the image-resize workload. POST a JPEG, get it back downscaled (640×480 by
//! default) and re-encoded, by the host's image capability (native libjpeg-turbo and SIMD
//! resampling; docs/configuration.md#images). The picture never enters the worker's memory:
//! the body stays in the host, is transformed by handle, and the result is the response body.
//!
//! ```text
//!  body (blob 0) ─▶ image_transform (host: decode at 1/2…1/8 scale, resize, encode) ─▶ blob 1
//!                                                                       response body ◀─┘
//! ```
//!
//! The same workload in pure Rust inside Wasm is `workers/image-resize-wasm`.
//!
//! | answer | when |
//! |---|---|
//! | 200 `image/jpeg` (or `image/png`) | the picture, resized |
//! | 400 `invalid_image` | the body is not a JPEG the host reads (corrupt, truncated, another format) |
//! | 405 | not a POST |
//! | 413 `image_too_large` | more pixels than the worker's `image.max_pixels`, or an output over `image.max_output` |
//! | 500 `image_not_granted` | the worker's configuration has no `image` grant |
//!
//! Configuration (`[workers.NAME.config]`, all optional):
//!
//! | key | default | meaning |
//! |---|---|---|
//! | `width`, `height` | `640`, `480` | the box, 0 to 8192 (0: from the other side and the aspect ratio) |
//! | `fit` | `fill` | `fill` (exactly the box), `contain` (inside it, black bars), `cover` (cut to it) |
//! | `filter` | `bilinear` | `nearest`, `bilinear`, `catmull-rom`, `mitchell`, `lanczos3` |
//! | `quality` | `80` | JPEG quality, 1 to 100 |
//! | `format` | `jpeg` | `jpeg` or `png` |
//!
//! ```text
//! edgegate bench --write-image photo.jpg          # the lab's 1600×1200 test picture
//! curl --data-binary @photo.jpg localhost:8080/resize -o small.jpg
//! ```

#![cfg_attr(target_arch = "wasm32", no_std)]

use edgegate_sdk::host::Config;
use edgegate_sdk::image::{Filter, Fit, Transform};
use edgegate_sdk::{Blob, HostError, Request, Response};

/// The transform the worker's configuration asks for, and the media type of its answer.
pub fn transform(config: &Config) -> (Transform, &'static str) {
    let (mut width, mut height, mut quality) = (640, 480, 80);
    let mut t = Transform::new();
    let mut png = false;
    for (key, value) in config.iter() {
        match (key, value) {
            ("width", v) => width = dimension(v).unwrap_or(width),
            ("height", v) => height = dimension(v).unwrap_or(height),
            ("quality", v) => {
                quality = v.parse().ok().filter(|q| (1..=100).contains(q)).unwrap_or(80)
            }
            ("fit", "contain") => t = t.fit(Fit::Contain),
            ("fit", "cover") => t = t.fit(Fit::Cover),
            ("filter", "nearest") => t = t.filter(Filter::Nearest),
            ("filter", "catmull-rom") => t = t.filter(Filter::CatmullRom),
            ("filter", "mitchell") => t = t.filter(Filter::Mitchell),
            ("filter", "lanczos3") => t = t.filter(Filter::Lanczos3),
            ("format", "png") => png = true,
            _ => {}
        }
    }
    let t = t.resize(width, height);
    if png { (t.png(), "image/png") } else { (t.jpeg(quality), "image/jpeg") }
}

fn dimension(value: &str) -> Option<u32> {
    value.parse().ok().filter(|d| *d <= 8192)
}

/// Resizes the JPEG in the body.
pub fn handle(req: &Request) -> Response {
    if req.method() != "POST" {
        return Response::method_not_allowed("POST");
    }
    let (transform, media_type) = transform(&Config::load());
    match transform.run(Blob::BODY) {
        Ok(small) => Response::builder(200).header("content-type", media_type).body_blob(small),
        Err(HostError::InvalidImage) => Response::json_error(400, "invalid_image"),
        Err(HostError::LimitExceeded) => Response::json_error(413, "image_too_large"),
        Err(HostError::NotGranted) => Response::json_error(500, "image_not_granted"),
        Err(_) => Response::json_error(500, "image_failed"),
    }
}

edgegate_sdk::export!(handle, body = host);

#[cfg(test)]
mod tests {
    use super::*;
    use edgegate_sdk::testing::TestRequest;

    #[test]
    fn only_post() {
        let t = TestRequest::new("GET", "/resize");
        assert_eq!(handle(&t.request()).status(), 405);
    }

    #[test]
    fn natively_the_capability_is_not_granted() {
        // The transform itself runs in the host: the gateway's tests cover it end to end.
        let t = TestRequest::new("POST", "/resize").body(b"\xff\xd8");
        let response = handle(&t.request());
        assert_eq!(response.status(), 500);
        assert_eq!(response.body(), br#"{"error":"image_not_granted"}"#);
    }
}
