// Pure-JavaScript JPEG resizing for workerd, where sharp (a native addon) cannot run:
// jpeg-js decodes and encodes, and a separable triangle (bilinear) filter downscales, the
// filter edgegate's worker and sharp's `kernel: 'linear'` use.
import decode from './jpeg-decoder.js';
import encode from './jpeg-encoder.js';

// Weights of a triangle filter from `src` samples to `dst` samples, per output sample.
function weights(src, dst) {
  const scale = src / dst;
  const support = Math.max(scale, 1);
  const table = [];
  for (let i = 0; i < dst; i++) {
    const center = (i + 0.5) * scale;
    const start = Math.max(0, Math.floor(center - support));
    const end = Math.min(src, Math.ceil(center + support));
    const w = [];
    let sum = 0;
    for (let j = start; j < end; j++) {
      const x = Math.abs((j + 0.5 - center) / support);
      const v = x < 1 ? 1 - x : 0;
      w.push(v);
      sum += v;
    }
    table.push({ start, w: w.map((v) => v / sum) });
  }
  return table;
}

function resizeRgba(src, sw, sh, dw, dh) {
  const wx = weights(sw, dw);
  const wy = weights(sh, dh);
  const tmp = new Float32Array(dw * sh * 4);
  for (let y = 0; y < sh; y++) {
    for (let x = 0; x < dw; x++) {
      const { start, w } = wx[x];
      let r = 0, g = 0, b = 0;
      for (let k = 0; k < w.length; k++) {
        const at = (y * sw + start + k) * 4;
        r += src[at] * w[k];
        g += src[at + 1] * w[k];
        b += src[at + 2] * w[k];
      }
      const out = (y * dw + x) * 4;
      tmp[out] = r;
      tmp[out + 1] = g;
      tmp[out + 2] = b;
    }
  }
  const dst = new Uint8Array(dw * dh * 4);
  for (let y = 0; y < dh; y++) {
    const { start, w } = wy[y];
    for (let x = 0; x < dw; x++) {
      let r = 0, g = 0, b = 0;
      for (let k = 0; k < w.length; k++) {
        const at = ((start + k) * dw + x) * 4;
        r += tmp[at] * w[k];
        g += tmp[at + 1] * w[k];
        b += tmp[at + 2] * w[k];
      }
      const out = (y * dw + x) * 4;
      dst[out] = r;
      dst[out + 1] = g;
      dst[out + 2] = b;
      dst[out + 3] = 255;
    }
  }
  return dst;
}

export async function resize(jpeg) {
  const image = decode(jpeg, { useTArray: true, formatAsRGBA: true, maxMemoryUsageInMB: 64 });
  const data = resizeRgba(image.data, image.width, image.height, 640, 480);
  return encode({ data, width: 640, height: 480 }, 80).data;
}
