//! Pictures, decoded, resized and encoded by the host in native code (libjpeg-turbo and SIMD
//! resampling), for a worker granted `image` (docs/configuration.md#images).
//!
//! The picture stays in the host: a worker exported with `export!(handle, body = host)` hands
//! the request's body to [`Transform::run`] by handle, and answers with the result the same
//! way, so a 2 MB picture is never copied into or out of the worker's memory.
//!
//! ```ignore
//! use edgegate_sdk::image::{self, Fit, Transform};
//! use edgegate_sdk::{Blob, HostError, Request, Response};
//!
//! fn handle(_req: &Request) -> Response {
//!     match Transform::new().resize(640, 480).fit(Fit::Cover).jpeg(80).run(Blob::BODY) {
//!         Ok(small) => Response::builder(200).header("content-type", "image/jpeg").body_blob(small),
//!         Err(HostError::InvalidImage) => Response::json_error(400, "invalid_image"),
//!         Err(HostError::LimitExceeded) => Response::json_error(413, "image_too_large"),
//!         Err(_) => Response::json_error(500, "image_failed"),
//!     }
//! }
//! edgegate_sdk::export!(handle, body = host);
//! ```
//!
//! Errors: [`HostError::NotGranted`] (no `image` grant), [`HostError::InvalidImage`] (not a
//! JPEG the host reads), [`HostError::LimitExceeded`] (too many pixels in or out, an output
//! over the cap, more image memory than the worker's limit), [`HostError::InvalidArgument`]
//! (a crop outside the picture). A transform's CPU time counts against the request's CPU
//! budget; past it, the request ends with 503 `cpu_budget_exceeded`.

use edgegate_abi::HostError;
use edgegate_abi::image::TransformSpec;
pub use edgegate_abi::image::{Filter, Fit, Format, ImageInfo, Rect};

use crate::Blob;
use crate::blob::error;

/// Reads a picture's format, size and EXIF orientation from its header.
pub fn probe(blob: Blob) -> Result<ImageInfo, HostError> {
    let mut out = [0; ImageInfo::LEN];
    match crate::sys::probe_image(blob.handle(), &mut out) {
        0 => ImageInfo::parse(&out).map_err(|_| HostError::InvalidArgument),
        code => Err(error(code)),
    }
}

/// What to do to a picture. The default: its own size, turned upright by its EXIF
/// orientation, bilinear, JPEG at quality 80.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[must_use = "a transform does nothing until `run` is called"]
pub struct Transform {
    spec: TransformSpec,
}

impl Transform {
    /// The default transform.
    pub fn new() -> Self {
        Self::default()
    }

    /// Resize to a `width`×`height` box; 0 for one side keeps the aspect ratio.
    pub fn resize(mut self, width: u32, height: u32) -> Self {
        (self.spec.width, self.spec.height) = (width, height);
        self
    }

    /// How the picture fills the box (default [`Fit::Fill`]).
    pub fn fit(mut self, fit: Fit) -> Self {
        self.spec.fit = fit;
        self
    }

    /// The resampling filter (default [`Filter::Bilinear`]).
    pub fn filter(mut self, filter: Filter) -> Self {
        self.spec.filter = filter;
        self
    }

    /// Cut out this rectangle (of the upright picture) before resizing.
    pub fn crop(mut self, rect: Rect) -> Self {
        self.spec.crop = Some(rect);
        self
    }

    /// Whether to turn the picture upright by its EXIF orientation first (default yes).
    pub fn orient(mut self, orient: bool) -> Self {
        self.spec.orient = orient;
        self
    }

    /// The colour of [`Fit::Contain`]'s bars, `0xRRGGBBAA` (default opaque black).
    pub fn background(mut self, rgba: u32) -> Self {
        self.spec.background = rgba;
        self
    }

    /// Encode as JPEG at `quality` (1 to 100; out of range is clamped).
    pub fn jpeg(mut self, quality: u8) -> Self {
        self.spec.format = Format::Jpeg;
        self.spec.quality = u32::from(quality.clamp(1, 100));
        self
    }

    /// Encode as PNG (8-bit RGBA).
    pub fn png(mut self) -> Self {
        self.spec.format = Format::Png;
        self
    }

    /// Runs it on the picture in `blob`; returns the result, held by the host.
    pub fn run(self, blob: Blob) -> Result<Blob, HostError> {
        Blob::from_code(crate::sys::transform_image(blob.handle(), &self.spec.encode()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_builder_writes_the_spec_the_host_reads() {
        let t = Transform::new()
            .resize(640, 0)
            .fit(Fit::Contain)
            .filter(Filter::Lanczos3)
            .crop(Rect { x: 1, y: 2, width: 3, height: 4 })
            .orient(false)
            .background(0xffff_ffff)
            .jpeg(0);
        let spec = TransformSpec::parse(&t.spec.encode()).unwrap();
        assert_eq!((spec.width, spec.height, spec.fit), (640, 0, Fit::Contain));
        assert_eq!((spec.filter, spec.orient, spec.quality), (Filter::Lanczos3, false, 1));
        assert_eq!(spec.crop, Some(Rect { x: 1, y: 2, width: 3, height: 4 }));
        assert_eq!(Transform::new().png().spec.format, Format::Png);
    }

    #[test]
    fn natively_nothing_is_granted() {
        assert_eq!(probe(Blob::BODY), Err(HostError::NotGranted));
        assert_eq!(Transform::new().run(Blob::BODY), Err(HostError::NotGranted));
        assert_eq!(Blob::BODY.len(), Err(HostError::NotFound));
    }
}
