//! Planning a transform from the header alone: every size, the crop, the shrink-on-load
//! factor and the memory it will take are known before a pixel is decoded.

use fast_image_resize as fir;

use crate::orient::{self, transposes};
use std::time::{Duration, Instant};

use crate::{Budget, Error, Filter, Fit, ImageInfo, Limits, Pixels, TransformSpec};

/// The largest side libjpeg-turbo encodes.
const MAX_SIDE: u32 = 65_500;

/// A lower bound of libjpeg-turbo's decoding time per block of each scan. Measured here
/// (x86-64, libjpeg-turbo 2.1, `cargo test --release -p edgegate-image`): 43 to 46 ns, in
/// progressive pictures whose every scan is one end-of-band run, the cheapest scan there is;
/// a machine twice as fast is still above this.
const FLOOR_PER_BLOCK_SCAN: Duration = Duration::from_nanos(20);

/// Every size of one transform, in the picture's stored orientation.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    /// The size to decode at: the stored size scaled by 1/`shrink`.
    pub decoded: (u32, u32),
    /// The factor libjpeg-turbo scales by while decoding: 1, 2, 4 or 8.
    pub shrink: u32,
    /// The part of the decoded picture that is resized: `[left, top, width, height]`.
    pub source: [f64; 4],
    /// The size it is resized to.
    pub resized: (u32, u32),
    /// The output's size before it is turned upright (`contain` letterboxes into it).
    pub canvas: (u32, u32),
    /// Where the resized picture sits on the canvas.
    pub offset: (u32, u32),
    /// The EXIF orientation applied last (1: none).
    pub orientation: u32,
    /// Bytes of DCT coefficients the decode holds (a progressive picture's, see
    /// `markers`); 0 when only [`Plan::new`] planned it.
    pub coefficients: u64,
    /// The blocks the picture's scans cover, added up: what its decoding time grows with;
    /// 0 when only [`Plan::new`] planned it.
    pub block_scans: u64,
    filter: Filter,
    background: [u8; 4],
}

fn too_many(width: u32, height: u32, limits: &Limits) -> Error {
    Error::TooManyPixels { width: width.into(), height: height.into(), limit: limits.max_pixels }
}

fn swap((a, b): (u32, u32), transposed: bool) -> (u32, u32) {
    if transposed { (b, a) } else { (a, b) }
}

/// `size` scaled by `1/shrink` as libjpeg-turbo rounds it (up).
pub(crate) fn scaled(size: (u32, u32), shrink: u32) -> (u32, u32) {
    (size.0.div_ceil(shrink), size.1.div_ceil(shrink))
}

impl Plan {
    /// Plans `spec` for the JPEG `bytes`: its header and markers are read (not its pixels),
    /// and a picture with more scans than `limits` allows is refused.
    pub fn of(bytes: &[u8], spec: &TransformSpec, limits: &Limits) -> Result<Self, Error> {
        let info = crate::probe(bytes)?;
        let frame = crate::markers::read(bytes, limits.max_scans)?;
        let mut plan = Self::new(&info, spec, limits)?;
        plan.coefficients = frame.coefficients();
        plan.block_scans = frame.block_scans;
        Ok(plan)
    }

    /// The least time decoding will take: 20 ns (a lower bound of libjpeg-turbo's cost) for
    /// each block of each scan.
    pub fn least_decode_time(&self) -> Duration {
        FLOOR_PER_BLOCK_SCAN.saturating_mul(u32::try_from(self.block_scans).unwrap_or(u32::MAX))
    }

    /// Refuses a picture whose decoding alone cannot end within `budget`'s CPU time or
    /// before its deadline: libjpeg-turbo's decode cannot be stopped once started, so the
    /// work must fit before it starts.
    pub fn fits(&self, budget: &Budget) -> Result<(), Error> {
        let left = budget.cpu.min(budget.deadline.saturating_duration_since(Instant::now()));
        let least = self.least_decode_time();
        if least > left {
            return Err(Error::TooMuchWork { least, left });
        }
        Ok(())
    }

    /// Plans `spec` for a picture with header `info`; refuses, before anything is allocated, an
    /// input or an output with more pixels than `limits` allows and a crop outside the picture.
    pub fn new(info: &ImageInfo, spec: &TransformSpec, limits: &Limits) -> Result<Self, Error> {
        let (w, h) = (info.width, info.height);
        if u64::from(w) * u64::from(h) > limits.max_pixels {
            return Err(too_many(w, h, limits));
        }
        let orientation = if spec.orient { info.orientation } else { 1 };
        let transposed = transposes(orientation);
        let shown = swap((w, h), transposed);
        let region = match spec.crop {
            Some(c)
                if u64::from(c.x) + u64::from(c.width) > u64::from(shown.0)
                    || u64::from(c.y) + u64::from(c.height) > u64::from(shown.1) =>
            {
                return Err(Error::BadCrop(c, shown.0, shown.1));
            }
            Some(c) => [c.x, c.y, c.width, c.height].map(f64::from),
            None => [0.0, 0.0, f64::from(shown.0), f64::from(shown.1)],
        };
        let (rw, rh) = (region[2], region[3]);
        let side = |v: f64| (v.round() as u32).max(1);
        let boxed = match (spec.width, spec.height) {
            (0, 0) => (side(rw), side(rh)),
            (bw, 0) => (bw, side(rh * f64::from(bw) / rw)),
            (0, bh) => (side(rw * f64::from(bh) / rh), bh),
            both => both,
        };
        if u64::from(boxed.0) * u64::from(boxed.1) > limits.max_pixels
            || boxed.0 > MAX_SIDE
            || boxed.1 > MAX_SIDE
        {
            return Err(too_many(boxed.0, boxed.1, limits));
        }
        let (bw, bh) = (f64::from(boxed.0), f64::from(boxed.1));
        // The displayed part of the picture that is resized, and the size it is resized to.
        let (shown_source, shown_resized) = match spec.fit {
            Fit::Fill => (region, boxed),
            Fit::Contain => {
                let s = (bw / rw).min(bh / rh);
                (region, (side(rw * s).min(boxed.0), side(rh * s).min(boxed.1)))
            }
            Fit::Cover => {
                let s = (bw / rw).max(bh / rh);
                let (vw, vh) = ((bw / s).min(rw), (bh / s).min(rh));
                ([region[0] + (rw - vw) / 2.0, region[1] + (rh - vh) / 2.0, vw, vh], boxed)
            }
        };
        let source = orient::to_stored(orientation, shown, shown_source);
        let resized = swap(shown_resized, transposed);
        let canvas = swap(boxed, transposed);
        // Shrink on load: the largest factor that still leaves at least the resized size.
        let shrink = [8, 4, 2]
            .into_iter()
            .find(|&f| {
                source[2] / f64::from(f) >= f64::from(resized.0)
                    && source[3] / f64::from(f) >= f64::from(resized.1)
            })
            .unwrap_or(1);
        let decoded = scaled((w, h), shrink);
        let k = f64::from(shrink);
        let source = [
            source[0] / k,
            source[1] / k,
            (source[2] / k).min(f64::from(decoded.0) - source[0] / k),
            (source[3] / k).min(f64::from(decoded.1) - source[1] / k),
        ];
        let offset = ((canvas.0 - resized.0) / 2, (canvas.1 - resized.1) / 2);
        Ok(Self {
            decoded,
            shrink,
            source,
            resized,
            canvas,
            offset,
            orientation,
            coefficients: 0,
            block_scans: 0,
            filter: spec.filter,
            background: spec.background.to_be_bytes(),
        })
    }

    /// Bytes the transform holds at its peak: a progressive decode's coefficients, the
    /// decoded picture, the resized one, the canvas and its upright copy, and the encoder's
    /// output buffer (at most 4 bytes a pixel).
    pub fn memory(&self) -> u64 {
        let px = |(w, h): (u32, u32)| u64::from(w) * u64::from(h) * 4;
        self.coefficients + px(self.decoded) + px(self.resized) + 3 * px(self.canvas)
    }

    /// Resizes the decoded picture's source part to the resized size.
    pub(crate) fn resize(&self, decoded: Pixels) -> Result<Pixels, Error> {
        let src = fir::images::Image::from_vec_u8(
            decoded.width,
            decoded.height,
            decoded.rgba,
            fir::PixelType::U8x4,
        )
        .map_err(|e| Error::Invalid(e.to_string()))?;
        let mut dst = fir::images::Image::new(self.resized.0, self.resized.1, fir::PixelType::U8x4);
        let algorithm = match self.filter {
            Filter::Nearest => fir::ResizeAlg::Nearest,
            Filter::Bilinear => fir::ResizeAlg::Convolution(fir::FilterType::Bilinear),
            Filter::CatmullRom => fir::ResizeAlg::Convolution(fir::FilterType::CatmullRom),
            Filter::Mitchell => fir::ResizeAlg::Convolution(fir::FilterType::Mitchell),
            Filter::Lanczos3 => fir::ResizeAlg::Convolution(fir::FilterType::Lanczos3),
        };
        let [left, top, width, height] = self.source;
        let options =
            fir::ResizeOptions::new().resize_alg(algorithm).crop(left, top, width, height);
        fir::Resizer::new()
            .resize(&src, &mut dst, &options)
            .map_err(|e| Error::Invalid(e.to_string()))?;
        Ok(Pixels { width: self.resized.0, height: self.resized.1, rgba: dst.into_vec() })
    }

    /// The resized picture on its canvas: itself for `fill` and `cover`, centred on the
    /// background for `contain`.
    pub(crate) fn composed(&self, resized: Pixels) -> Pixels {
        if self.canvas == self.resized {
            return resized;
        }
        let (cw, ch) = (self.canvas.0 as usize, self.canvas.1 as usize);
        let mut rgba: Vec<u8> = self.background.iter().copied().cycle().take(cw * ch * 4).collect();
        let row = resized.width as usize * 4;
        for (y, line) in resized.rgba.chunks_exact(row).enumerate() {
            let at = ((self.offset.1 as usize + y) * cw + self.offset.0 as usize) * 4;
            rgba[at..at + row].copy_from_slice(line);
        }
        Pixels { width: self.canvas.0, height: self.canvas.1, rgba }
    }
}
