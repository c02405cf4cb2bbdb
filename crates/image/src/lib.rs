//! edgegate's image capability, in native code: what the `image_probe` and `image_transform`
//! host calls run (see `docs/abi.md` and `docs/architecture.md#images`).
//!
//! ```text
//!  JPEG ─▶ header + EXIF orientation ─▶ plan (pixel cap, crop, fit, shrink-on-load factor)
//!       ─▶ libjpeg-turbo decode at 1/1, 1/2, 1/4 or 1/8 scale (in the IDCT)
//!       ─▶ fast_image_resize (AVX2 where the CPU has it), crop on the way
//!       ─▶ letterbox (contain) ─▶ turn upright (EXIF) ─▶ JPEG (libjpeg-turbo) or PNG
//! ```
//!
//! Everything here is synchronous and single-threaded: the runtime runs it on its image
//! threads and charges the CPU time it reports to the request.

#![deny(missing_docs)]
#![forbid(unsafe_code)]

mod codec;
mod error;
mod markers;
mod orient;
mod plan;

use std::time::{Duration, Instant};

pub use edgegate_abi::image::{Filter, Fit, Format, ImageInfo, Rect, TransformSpec};
pub use error::Error;
pub use plan::Plan;

/// What one picture may cost.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// The most pixels (width × height) of an input, and of an output: a picture that declares
    /// more is refused from its header, before anything is allocated.
    pub max_pixels: u64,
    /// The most bytes of an encoded output.
    pub max_output: u64,
    /// The most scans an input may have: more is refused before it is decoded.
    pub max_scans: u32,
}

impl Default for Limits {
    fn default() -> Self {
        Self { max_pixels: 40_000_000, max_output: 16 << 20, max_scans: 100 }
    }
}

/// How much longer a transform may run: checked between its stages (decode, resize, encode).
#[derive(Debug, Clone, Copy)]
pub struct Budget {
    /// CPU time left to the request.
    pub cpu: Duration,
    /// When the request's deadline passes.
    pub deadline: Instant,
}

/// A transformed picture.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Output {
    /// The encoded picture.
    pub bytes: Vec<u8>,
    /// Its encoding.
    pub format: Format,
    /// Its width in pixels.
    pub width: u32,
    /// Its height in pixels.
    pub height: u32,
}

/// Reads a picture's format, size and EXIF orientation from its header, without decoding it.
pub fn probe(bytes: &[u8]) -> Result<ImageInfo, Error> {
    let (width, height) = codec::jpeg_size(bytes)?;
    Ok(ImageInfo { format: Format::Jpeg, width, height, orientation: orient::of(bytes) })
}

/// Transforms `bytes` as `spec` says, within `limits` and `budget`. Returns the result and the
/// CPU time this thread spent on it, which is reported whether it succeeded or not.
pub fn transform(
    bytes: &[u8],
    spec: &TransformSpec,
    limits: &Limits,
    budget: &Budget,
) -> (Result<Output, Error>, Duration) {
    let started = thread_cpu();
    let spent = || thread_cpu().saturating_sub(started);
    let check = || {
        let used = spent();
        if used > budget.cpu {
            return Err(Error::OverBudget { used, budget: budget.cpu });
        }
        if Instant::now() >= budget.deadline {
            return Err(Error::Deadline);
        }
        Ok(())
    };
    let result = (|| {
        let plan = Plan::of(bytes, spec, limits)?;
        plan.fits(budget)?;
        let decoded = codec::decode_jpeg(bytes, plan.decoded)?;
        check()?;
        let resized = plan.resize(decoded)?;
        let upright = orient::apply(plan.composed(resized), plan.orientation);
        check()?;
        let encoded = codec::encode(&upright, spec.format, spec.quality)?;
        if encoded.len() as u64 > limits.max_output {
            return Err(Error::OutputTooLarge {
                size: encoded.len() as u64,
                limit: limits.max_output,
            });
        }
        check()?;
        Ok(Output {
            bytes: encoded,
            format: spec.format,
            width: upright.width,
            height: upright.height,
        })
    })();
    (result, spent())
}

/// An RGBA picture in memory, rows packed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Pixels {
    pub(crate) width: u32,
    pub(crate) height: u32,
    pub(crate) rgba: Vec<u8>,
}

/// This thread's CPU time.
fn thread_cpu() -> Duration {
    let ts = rustix::time::clock_gettime(rustix::time::ClockId::ThreadCPUTime);
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

#[cfg(test)]
mod tests;
