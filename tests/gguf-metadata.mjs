// Reads a GGUF file's metadata in node into the object shape the package's readMetadata returns
// (numbers, booleans, strings and arrays of them), for the node tests of www/tokenizer.js, which
// run without the wasm package. Layout from the GGUF specification (ggml's docs/gguf.md):
// magic "GGUF", u32 version (2 or 3), u64 tensor count, u64 key-value count, then the pairs.
import { openSync, readSync, closeSync, fstatSync } from 'node:fs';

const decoder = new TextDecoder();

/** The metadata of the GGUF at `path` (only its header is read). Throws on a malformed header. */
export function readGgufMetadata(path) {
  const fd = openSync(path, 'r');
  try {
    // Headers of the models the tests read fit in a few MiB (a 256k vocabulary is about 6 MiB).
    const size = Math.min(fstatSync(fd).size, 64 << 20);
    const buf = Buffer.alloc(size);
    readSync(fd, buf, 0, size, 0);
    return parse(buf, path);
  } finally {
    closeSync(fd);
  }
}

function parse(buf, path) {
  let at = 0;
  const need = (n) => { if (at + n > buf.length) throw new Error(`${path}: GGUF header ends early at byte ${at}`); };
  const u32 = () => { need(4); const v = buf.readUInt32LE(at); at += 4; return v; };
  const u64 = () => { need(8); const v = Number(buf.readBigUInt64LE(at)); at += 8; return v; };
  const str = () => { const n = u64(); need(n); const s = decoder.decode(buf.subarray(at, at + n)); at += n; return s; };
  const scalar = {
    0: () => { need(1); return buf.readUInt8(at++); },
    1: () => { need(1); return buf.readInt8(at++); },
    2: () => { need(2); const v = buf.readUInt16LE(at); at += 2; return v; },
    3: () => { need(2); const v = buf.readInt16LE(at); at += 2; return v; },
    4: u32,
    5: () => { need(4); const v = buf.readInt32LE(at); at += 4; return v; },
    6: () => { need(4); const v = buf.readFloatLE(at); at += 4; return v; },
    7: () => { need(1); return buf.readUInt8(at++) !== 0; },
    8: str,
    10: u64,
    11: () => { need(8); const v = Number(buf.readBigInt64LE(at)); at += 8; return v; },
    12: () => { need(8); const v = buf.readDoubleLE(at); at += 8; return v; },
  };
  const value = (type) => {
    if (type === 9) {
      const inner = u32(), n = u64();
      const out = new Array(n);
      for (let i = 0; i < n; i++) out[i] = value(inner);
      return out;
    }
    const read = scalar[type];
    if (!read) throw new Error(`${path}: unknown GGUF value type ${type} at byte ${at}`);
    return read();
  };
  if (buf.toString('latin1', 0, 4) !== 'GGUF') throw new Error(`${path}: not a GGUF file`);
  at = 4;
  const version = u32();
  if (version < 2) throw new Error(`${path}: GGUF version ${version} is not supported`);
  u64();
  const count = u64();
  const meta = {};
  for (let i = 0; i < count; i++) {
    const key = str();
    meta[key] = value(u32());
  }
  return meta;
}
