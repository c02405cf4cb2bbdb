//! EXIF orientation: reading it, and turning pixels (and rectangles) between the way a
//! picture is stored and the way it is displayed.
//!
//! ```text
//! 1 as stored   2 mirrored      3 rotated 180°   4 flipped
//! 5 transposed  6 rotated 90° ↻  7 transversed    8 rotated 90° ↺
//! ```
//!
//! 5 to 8 swap width and height.

use crate::Pixels;

/// The EXIF orientation of a JPEG, 1 to 8; 1 when it has none (or an unreadable one).
pub(crate) fn of(bytes: &[u8]) -> u32 {
    let Ok(exif) = exif::Reader::new().read_from_container(&mut std::io::Cursor::new(bytes)) else {
        return 1;
    };
    exif.get_field(exif::Tag::Orientation, exif::In::PRIMARY)
        .and_then(|field| field.value.get_uint(0))
        .filter(|o| (1..=8).contains(o))
        .unwrap_or(1)
}

/// Whether `orientation` swaps width and height.
pub(crate) fn transposes(orientation: u32) -> bool {
    (5..=8).contains(&orientation)
}

/// Where stored pixel `(x, y)` of a `w`×`h` picture is displayed.
fn displayed(orientation: u32, (w, h): (u32, u32), (x, y): (u32, u32)) -> (u32, u32) {
    match orientation {
        2 => (w - 1 - x, y),
        3 => (w - 1 - x, h - 1 - y),
        4 => (x, h - 1 - y),
        5 => (y, x),
        6 => (h - 1 - y, x),
        7 => (h - 1 - y, w - 1 - x),
        8 => (y, w - 1 - x),
        _ => (x, y),
    }
}

/// The inverse orientation: the one that turns the displayed picture back as stored.
fn inverse(orientation: u32) -> u32 {
    match orientation {
        6 => 8,
        8 => 6,
        other => other,
    }
}

/// Where the point `(x, y)` of a `w`×`h` picture goes (edges, not pixel centres: the
/// continuous form of [`displayed`]).
fn displayed_point(orientation: u32, (w, h): (f64, f64), (x, y): (f64, f64)) -> (f64, f64) {
    match orientation {
        2 => (w - x, y),
        3 => (w - x, h - y),
        4 => (x, h - y),
        5 => (y, x),
        6 => (h - y, x),
        7 => (h - y, w - x),
        8 => (y, w - x),
        _ => (x, y),
    }
}

/// A rectangle of the displayed picture (`size` as displayed), in stored coordinates:
/// `[left, top, width, height]`.
pub(crate) fn to_stored(orientation: u32, size: (u32, u32), rect: [f64; 4]) -> [f64; 4] {
    let back = inverse(orientation);
    let size = (f64::from(size.0), f64::from(size.1));
    let a = displayed_point(back, size, (rect[0], rect[1]));
    let b = displayed_point(back, size, (rect[0] + rect[2], rect[1] + rect[3]));
    [a.0.min(b.0), a.1.min(b.1), (a.0 - b.0).abs(), (a.1 - b.1).abs()]
}

/// Turns stored pixels upright.
pub(crate) fn apply(pixels: Pixels, orientation: u32) -> Pixels {
    if !(2..=8).contains(&orientation) {
        return pixels;
    }
    let (w, h) = (pixels.width, pixels.height);
    let (dw, dh) = if transposes(orientation) { (h, w) } else { (w, h) };
    let mut out = vec![0u8; pixels.rgba.len()];
    for (i, px) in pixels.rgba.chunks_exact(4).enumerate() {
        let (x, y) = (i as u32 % w, i as u32 / w);
        let (dx, dy) = displayed(orientation, (w, h), (x, y));
        let at = (dy as usize * dw as usize + dx as usize) * 4;
        out[at..at + 4].copy_from_slice(px);
    }
    Pixels { width: dw, height: dh, rgba: out }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A 3×2 picture whose pixel at (x, y) is `[x, y, 0, 255]`.
    fn marked() -> Pixels {
        let rgba = (0..2u8).flat_map(|y| (0..3u8).flat_map(move |x| [x, y, 0, 255])).collect();
        Pixels { width: 3, height: 2, rgba }
    }

    fn at(p: &Pixels, x: u32, y: u32) -> [u8; 2] {
        let i = ((y * p.width + x) * 4) as usize;
        [p.rgba[i], p.rgba[i + 1]]
    }

    #[test]
    fn each_orientation_puts_the_stored_top_left_where_exif_says() {
        // Where the stored top-left pixel (0, 0) ends up, and the displayed size.
        let expected = [
            (1, (0, 0), (3, 2)),
            (2, (2, 0), (3, 2)),
            (3, (2, 1), (3, 2)),
            (4, (0, 1), (3, 2)),
            (5, (0, 0), (2, 3)),
            (6, (1, 0), (2, 3)),
            (7, (1, 2), (2, 3)),
            (8, (0, 2), (2, 3)),
        ];
        for (orientation, (x, y), size) in expected {
            let p = apply(marked(), orientation);
            assert_eq!((p.width, p.height), size, "orientation {orientation}");
            assert_eq!(at(&p, x, y), [0, 0], "orientation {orientation}");
        }
    }

    #[test]
    fn a_displayed_rectangle_maps_back_to_the_same_pixels() {
        for orientation in 1..=8 {
            let upright = apply(marked(), orientation);
            let size = (upright.width, upright.height);
            // The displayed pixel (0, 0) alone, and the whole picture.
            let one = to_stored(orientation, size, [0.0, 0.0, 1.0, 1.0]);
            assert_eq!(one[2..], [1.0, 1.0]);
            assert_eq!(
                at(&upright, 0, 0),
                [one[0] as u8, one[1] as u8],
                "orientation {orientation}"
            );
            let all = [0.0, 0.0, f64::from(size.0), f64::from(size.1)];
            assert_eq!(to_stored(orientation, size, all), [0.0, 0.0, 3.0, 2.0], "{orientation}");
        }
    }
}
