//! Downscaling (and upscaling) RGB pixels with a separable triangle filter: the filter of
//! sharp's `kernel: 'linear'`, fast_image_resize's `Bilinear` and the lab's JavaScript
//! comparator (`bench/node/resize-js.mjs`), so every runtime in the lab does the same work.
//!
//! The weights are 14-bit fixed point and every output sample reads a window of the same width
//! (`Taps::stride`, zero weights padding the short windows at the edges), so the inner loops have
//! no branches and no bounds checks and the compiler vectorises them; on wasm32 they are compiled
//! with SIMD128. Written here rather than taken from fast_image_resize because that crate brought
//! 25 KB of code (every filter, every pixel type, alpha handling) into a module whose budget is
//! 180 KB, for the one filter this worker uses.

use alloc::vec;
use alloc::vec::Vec;

/// Bytes per pixel: R, G, B and A (which is carried through like a colour). Four bytes make a
/// pixel one 128-bit vector of 32-bit accumulators.
pub const CHANNELS: usize = 4;

/// Fractional bits of a weight: weights of one output sample sum to exactly `ONE`.
const PRECISION: u32 = 14;
const ONE: i32 = 1 << PRECISION;
/// Added before the final shift, so that it rounds to nearest.
const HALF: i32 = ONE / 2;

/// Resizes `src`, `src_width`×`src_height` RGB pixels, to `width`×`height`. `None` when a size
/// is zero or `src` is not that many pixels. `src` is taken by value and freed after the first
/// pass, so that the peak memory is the source and one intermediate, not the source and both.
pub fn resize(
    src: Vec<u8>,
    (src_width, src_height): (usize, usize),
    (width, height): (usize, usize),
) -> Option<Vec<u8>> {
    if src_width == 0 || src_height == 0 || width == 0 || height == 0 {
        return None;
    }
    if src.len() != src_width.checked_mul(src_height)?.checked_mul(CHANNELS)? {
        return None;
    }
    // Rows first: that pass runs along whole rows, the one that vectorises best, and leaves
    // fewer rows for the pass along each row.
    let mut short = vec![0; src_width * height * CHANNELS];
    vertical(&src, src_width * CHANNELS, &Taps::new(src_height, height), &mut short);
    drop(src);
    let mut out = vec![0; width * height * CHANNELS];
    horizontal(&short, src_width, &Taps::new(src_width, width), &mut out);
    Some(out)
}

/// Which input samples make each output sample, and with which weights.
#[derive(Debug)]
struct Taps {
    /// Per output sample, the first input sample of its window. `start + stride <= src`.
    starts: Vec<usize>,
    /// Per output sample, `stride` weights in fixed point, summing to `ONE`.
    weights: Vec<i16>,
    stride: usize,
}

impl Taps {
    /// The triangle filter from `src` samples to `dst` samples (both at least 1): a radius of
    /// one output sample when shrinking (so every input sample counts), one input sample when
    /// enlarging (linear interpolation).
    fn new(src: usize, dst: usize) -> Self {
        let scale = src as f64 / dst as f64;
        let support = scale.max(1.0);
        let span = |i: usize| {
            let center = (i as f64 + 0.5) * scale;
            let lo = floor(center - support).max(0) as usize;
            let hi = (ceil(center + support).max(0) as usize).min(src);
            (center, lo, hi.max(lo + 1))
        };
        let stride = (0..dst).map(|i| span(i).2 - span(i).1).max().unwrap_or(1);
        let mut starts = Vec::with_capacity(dst);
        let mut weights = vec![0i16; dst * stride];
        let mut float = vec![0f64; stride];
        for (i, out) in weights.chunks_exact_mut(stride).enumerate() {
            let (center, lo, hi) = span(i);
            // Windows are all `stride` wide; a short one at the right edge starts earlier.
            let start = lo.min(src - stride);
            float.fill(0.0);
            for j in lo..hi {
                let x = ((j as f64 + 0.5 - center) / support).abs();
                float[j - start] = (1.0 - x).max(0.0);
            }
            let sum: f64 = float.iter().sum();
            if sum <= 0.0 {
                // Cannot happen for a triangle of radius >= 1 around a point inside the input;
                // the nearest sample keeps the output defined all the same.
                float[lo - start] = 1.0;
            }
            let sum: f64 = float.iter().sum();
            let mut total = 0;
            for (w, f) in out.iter_mut().zip(&float) {
                *w = floor(f / sum * f64::from(ONE) + 0.5) as i16;
                total += i32::from(*w);
            }
            // Rounding may leave the sum a little off ONE: the largest weight absorbs it.
            let largest = (0..stride).max_by_key(|&k| out[k]).unwrap_or(0);
            out[largest] += (ONE - total) as i16;
            starts.push(start);
        }
        Self { starts, weights, stride }
    }

    fn iter(&self) -> impl Iterator<Item = (usize, &[i16])> {
        self.starts.iter().copied().zip(self.weights.chunks_exact(self.stride))
    }
}

/// Rows of `src` (`src_width` pixels each) into rows of `dst` (`taps.starts.len()` pixels).
#[cfg_attr(target_arch = "wasm32", target_feature(enable = "simd128"))]
fn horizontal(src: &[u8], src_width: usize, taps: &Taps, dst: &mut [u8]) {
    let dst_width = taps.starts.len();
    let rows =
        src.chunks_exact(src_width * CHANNELS).zip(dst.chunks_exact_mut(dst_width * CHANNELS));
    for (src_row, dst_row) in rows {
        for (out, (start, weights)) in dst_row.chunks_exact_mut(CHANNELS).zip(taps.iter()) {
            let window = &src_row[start * CHANNELS..(start + taps.stride) * CHANNELS];
            let mut acc = [HALF; CHANNELS];
            for (pixel, &w) in window.chunks_exact(CHANNELS).zip(weights) {
                for (a, &p) in acc.iter_mut().zip(pixel) {
                    *a += i32::from(p) * i32::from(w);
                }
            }
            for (o, a) in out.iter_mut().zip(acc) {
                *o = to_u8(a);
            }
        }
    }
}

/// Rows of `src` (`row_bytes` each) into `taps.starts.len()` rows of `dst`, 16 bytes at a time:
/// each block's accumulators stay in registers across all the taps.
#[cfg_attr(target_arch = "wasm32", target_feature(enable = "simd128"))]
fn vertical(src: &[u8], row_bytes: usize, taps: &Taps, dst: &mut [u8]) {
    const BLOCK: usize = 16;
    for (out, (start, weights)) in dst.chunks_exact_mut(row_bytes).zip(taps.iter()) {
        let rows = &src[start * row_bytes..(start + taps.stride) * row_bytes];
        let mut blocks = out.chunks_exact_mut(BLOCK);
        for (b, block) in blocks.by_ref().enumerate() {
            let mut acc = [HALF; BLOCK];
            for (row, &w) in rows.chunks_exact(row_bytes).zip(weights) {
                let pixels = &row[b * BLOCK..][..BLOCK];
                for (a, &p) in acc.iter_mut().zip(pixels) {
                    *a += i32::from(p) * i32::from(w);
                }
            }
            for (o, a) in block.iter_mut().zip(acc) {
                *o = to_u8(a);
            }
        }
        let tail = row_bytes - blocks.into_remainder().len();
        for (x, o) in out.iter_mut().enumerate().skip(tail) {
            let mut acc = HALF;
            for (row, &w) in rows.chunks_exact(row_bytes).zip(weights) {
                acc += i32::from(row[x]) * i32::from(w);
            }
            *o = to_u8(acc);
        }
    }
}

fn to_u8(acc: i32) -> u8 {
    (acc >> PRECISION).clamp(0, 255) as u8
}

// `f64::floor` and `ceil` are not in `core`.
fn floor(x: f64) -> i64 {
    let t = x as i64;
    if (t as f64) > x { t - 1 } else { t }
}

fn ceil(x: f64) -> i64 {
    -floor(-x)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The filter in floating point, as the lab's JavaScript computes it.
    fn reference(src: &[u8], (sw, sh): (usize, usize), (dw, dh): (usize, usize)) -> Vec<f64> {
        fn weights(src: usize, dst: usize) -> Vec<(usize, Vec<f64>)> {
            let scale = src as f64 / dst as f64;
            let support = scale.max(1.0);
            (0..dst)
                .map(|i| {
                    let center = (i as f64 + 0.5) * scale;
                    let start = (center - support).floor().max(0.0) as usize;
                    let end = ((center + support).ceil() as usize).min(src);
                    let w: Vec<f64> = (start..end)
                        .map(|j| (1.0 - ((j as f64 + 0.5 - center) / support).abs()).max(0.0))
                        .collect();
                    let sum: f64 = w.iter().sum();
                    (start, w.iter().map(|v| v / sum).collect())
                })
                .collect()
        }
        let (wx, wy) = (weights(sw, dw), weights(sh, dh));
        let mut out = vec![0.0; dw * dh * CHANNELS];
        for (y, (ys, yw)) in wy.iter().enumerate() {
            for (x, (xs, xw)) in wx.iter().enumerate() {
                for c in 0..CHANNELS {
                    let mut v = 0.0;
                    for (ky, wyk) in yw.iter().enumerate() {
                        for (kx, wxk) in xw.iter().enumerate() {
                            let at = ((ys + ky) * sw + xs + kx) * CHANNELS + c;
                            v += f64::from(src[at]) * wyk * wxk;
                        }
                    }
                    out[(y * dw + x) * CHANNELS + c] = v;
                }
            }
        }
        out
    }

    fn pattern(width: usize, height: usize) -> Vec<u8> {
        let mut px = Vec::with_capacity(width * height * CHANNELS);
        for y in 0..height {
            for x in 0..width {
                px.extend_from_slice(&[
                    (x * 7 % 256) as u8,
                    (y * 13 % 256) as u8,
                    ((x ^ y) % 256) as u8,
                    255,
                ]);
            }
        }
        px
    }

    #[test]
    fn windows_stay_inside_the_input_and_weights_sum_to_one() {
        for src in 1..48 {
            for dst in 1..48 {
                let taps = Taps::new(src, dst);
                assert_eq!(taps.starts.len(), dst);
                assert!(taps.stride <= src, "{src}->{dst}: stride {}", taps.stride);
                for (start, weights) in taps.iter() {
                    assert!(start + taps.stride <= src, "{src}->{dst}: window at {start}");
                    assert_eq!(weights.iter().map(|&w| i32::from(w)).sum::<i32>(), ONE);
                    assert!(weights.iter().all(|&w| w >= 0), "{src}->{dst}: {weights:?}");
                }
            }
        }
    }

    #[test]
    fn matches_the_floating_point_filter_to_one_level() {
        // Shrinking by whole and odd factors, enlarging, and one axis each way.
        for (from, to) in
            [((64, 48), (16, 12)), ((160, 120), (64, 48)), ((7, 5), (30, 20)), ((50, 9), (13, 27))]
        {
            let src = pattern(from.0, from.1);
            let want = reference(&src, from, to);
            let got = resize(src, from, to).unwrap();
            for (i, (&g, &w)) in got.iter().zip(&want).enumerate() {
                // Two roundings (after each pass) against none: at most one level apart.
                assert!((f64::from(g) - w).abs() <= 1.5, "{from:?}->{to:?} at {i}: {g} vs {w:.2}");
            }
        }
    }

    #[test]
    fn a_flat_colour_stays_exactly_that_colour() {
        for (from, to) in [((1600, 12), (640, 5)), ((1, 1), (9, 7)), ((33, 17), (1, 1))] {
            let src = [200u8, 10, 99, 255].repeat(from.0 * from.1);
            let out = resize(src, from, to).unwrap();
            assert_eq!(out.len(), to.0 * to.1 * CHANNELS);
            assert!(out.chunks_exact(4).all(|p| p == [200, 10, 99, 255]), "{from:?}->{to:?}");
        }
    }

    #[test]
    fn a_wrong_size_or_an_empty_picture_is_refused() {
        assert_eq!(resize(vec![0; 15], (2, 2), (1, 1)), None);
        assert_eq!(resize(Vec::new(), (0, 5), (1, 1)), None);
        assert_eq!(resize(vec![0; 16], (2, 2), (0, 1)), None);
        assert_eq!(resize(Vec::new(), (usize::MAX, 3), (1, 1)), None);
    }
}
