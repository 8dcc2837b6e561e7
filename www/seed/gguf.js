// The `./gguf.js` the seed prototype imports (../shared/seeds/000_9edf6990fd25599c.txt), so that
// the browser benchmark can run the seed on the same page as webgpu-llama. Ours, small and
// independent of the Rust reader: GGUF v2/v3 header and metadata (GGUF spec), tensor infos, and
// CPU dequantisation to f32 for the types the shared models and SmolLM2 use (ggml-quants.c
// dequantize_row_*): F32, F16, BF16, Q4_0, Q4_1, Q8_0, Q4_K, Q6_K.
export const GGML_Q8_0 = 8;
const F32 = 0, F16 = 1, Q4_0 = 2, Q4_1 = 3, Q8_0 = 8, Q4_K = 12, Q6_K = 14, BF16 = 30;
const BLOCK = { [F32]: [1, 4], [F16]: [1, 2], [Q4_0]: [32, 18], [Q4_1]: [32, 20], [Q8_0]: [32, 34],
                [Q4_K]: [256, 144], [Q6_K]: [256, 210], [BF16]: [1, 2] };

const f16buf = new DataView(new ArrayBuffer(4));
export function f16ToF32(h) {
  const s = (h & 0x8000) << 16, e = (h >> 10) & 0x1f, m = h & 0x3ff;
  if (e === 0) return (s ? -1 : 1) * m * 2 ** -24;
  if (e === 31) { f16buf.setUint32(0, s | 0x7f800000 | (m << 13)); return f16buf.getFloat32(0); }
  f16buf.setUint32(0, s | ((e + 112) << 23) | (m << 13));
  return f16buf.getFloat32(0);
}

export function readGguf(buf) {
  const dv = new DataView(buf), td = new TextDecoder();
  let o = 0;
  const u32 = () => { const v = dv.getUint32(o, true); o += 4; return v; };
  const u64 = () => { const v = Number(dv.getBigUint64(o, true)); o += 8; return v; };
  const str = () => { const n = u64(); const s = td.decode(new Uint8Array(buf, o, n)); o += n; return s; };
  const val = (t) => {
    switch (t) {
      case 0: return dv.getUint8(o++);
      case 1: return dv.getInt8(o++);
      case 2: { const v = dv.getUint16(o, true); o += 2; return v; }
      case 3: { const v = dv.getInt16(o, true); o += 2; return v; }
      case 4: return u32();
      case 5: { const v = dv.getInt32(o, true); o += 4; return v; }
      case 6: { const v = dv.getFloat32(o, true); o += 4; return v; }
      case 7: return dv.getUint8(o++) !== 0;
      case 8: return str();
      case 9: { const et = u32(), n = u64(); const a = new Array(n); for (let i = 0; i < n; i++) a[i] = val(et); return a; }
      case 10: return u64();
      case 11: { const v = Number(dv.getBigInt64(o, true)); o += 8; return v; }
      case 12: { const v = dv.getFloat64(o, true); o += 8; return v; }
      default: throw new Error(`GGUF: unknown value type ${t}`);
    }
  };
  if (u32() !== 0x46554747) throw new Error('not a GGUF file');
  const version = u32();
  if (version !== 2 && version !== 3) throw new Error(`unsupported GGUF version ${version}`);
  const nt = u64(), nkv = u64(), meta = {};
  for (let i = 0; i < nkv; i++) { const k = str(); meta[k] = val(u32()); }
  const infos = [];
  for (let i = 0; i < nt; i++) {
    const name = str(), nd = u32(), dims = [];
    for (let j = 0; j < nd; j++) dims.push(u64());
    infos.push({ name, dims, type: u32(), offset: u64() });
  }
  const align = meta['general.alignment'] || 32;
  const base = Math.ceil(o / align) * align, tensors = {};
  for (const t of infos) {
    const n = t.dims.reduce((a, b) => a * b, 1);
    tensors[t.name] = { dims: t.dims, type: t.type, n, start: base + t.offset };
  }
  return { buf, meta, tensors, version };
}

function scaleMinK4(j, q, o) {
  if (j < 4) return [q[o + j] & 63, q[o + j + 4] & 63];
  return [(q[o + j + 4] & 0xf) | ((q[o + j - 4] >> 6) << 4), (q[o + j + 4] >> 4) | ((q[o + j] >> 6) << 4)];
}

export function tensorF32(g, name) {
  const t = g.tensors[name];
  if (!t) throw new Error(`missing tensor ${name}`);
  const bs = BLOCK[t.type];
  if (!bs) throw new Error(`tensor ${name} has unsupported type ${t.type}`);
  const out = new Float32Array(t.n), q = new Uint8Array(g.buf, t.start, (t.n / bs[0]) * bs[1]);
  const dv = new DataView(g.buf, t.start, q.length), h = (i) => f16ToF32(dv.getUint16(i, true));
  const nb = t.n / bs[0];
  if (t.type === F32) out.set(new Float32Array(g.buf.slice(t.start, t.start + 4 * t.n)));
  else if (t.type === F16) for (let i = 0; i < t.n; i++) out[i] = h(2 * i);
  else if (t.type === BF16) for (let i = 0; i < t.n; i++) { f16buf.setUint32(0, dv.getUint16(2 * i, true) << 16); out[i] = f16buf.getFloat32(0); }
  else if (t.type === Q8_0) for (let b = 0; b < nb; b++) { const d = h(34 * b); for (let i = 0; i < 32; i++) out[32 * b + i] = d * dv.getInt8(34 * b + 2 + i); }
  else if (t.type === Q4_0 || t.type === Q4_1) {
    const sz = bs[1], qo = t.type === Q4_0 ? 2 : 4;
    for (let b = 0; b < nb; b++) {
      const d = h(sz * b), m = t.type === Q4_0 ? -8 * d : h(sz * b + 2);
      for (let i = 0; i < 16; i++) {
        const x = q[sz * b + qo + i];
        out[32 * b + i] = (x & 0xf) * d + m; out[32 * b + i + 16] = (x >> 4) * d + m;
      }
    }
  } else if (t.type === Q4_K) {
    for (let b = 0; b < nb; b++) {
      const o = 144 * b, d = h(o), dmin = h(o + 2);
      let y = 256 * b, qs = o + 16, is = 0;
      for (let j = 0; j < 256; j += 64) {
        const [s1, m1] = scaleMinK4(is, q, o + 4), [s2, m2] = scaleMinK4(is + 1, q, o + 4);
        for (let l = 0; l < 32; l++) out[y++] = d * s1 * (q[qs + l] & 0xf) - dmin * m1;
        for (let l = 0; l < 32; l++) out[y++] = d * s2 * (q[qs + l] >> 4) - dmin * m2;
        qs += 32; is += 2;
      }
    }
  } else if (t.type === Q6_K) {
    for (let b = 0; b < nb; b++) {
      const o = 210 * b, d = h(o + 208);
      for (let n = 0; n < 2; n++) {
        const ql = o + 64 * n, qh = o + 128 + 32 * n, sc = o + 192 + 8 * n, y = 256 * b + 128 * n;
        const s = (i) => dv.getInt8(sc + i);
        for (let l = 0; l < 32; l++) {
          const is = l >> 4;
          const q1 = ((q[ql + l] & 0xf) | (((q[qh + l] >> 0) & 3) << 4)) - 32;
          const q2 = ((q[ql + l + 32] & 0xf) | (((q[qh + l] >> 2) & 3) << 4)) - 32;
          const q3 = ((q[ql + l] >> 4) | (((q[qh + l] >> 4) & 3) << 4)) - 32;
          const q4 = ((q[ql + l + 32] >> 4) | (((q[qh + l] >> 6) & 3) << 4)) - 32;
          out[y + l] = d * s(is) * q1; out[y + l + 32] = d * s(is + 2) * q2;
          out[y + l + 64] = d * s(is + 4) * q3; out[y + l + 96] = d * s(is + 6) * q4;
        }
      }
    }
  }
  return out;
}
