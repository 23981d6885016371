// Reads the tensors of a Hugging Face model directory (model.safetensors, or the shards named in
// model.safetensors.index.json). Tensors are read on demand, one at a time.
import fs from "node:fs";
import path from "node:path";

const DTYPE_SIZE = { F32: 4, F16: 2, BF16: 2 };

function readHeader(file) {
  const fd = fs.openSync(file, "r");
  try {
    const lenBuf = Buffer.alloc(8);
    fs.readSync(fd, lenBuf, 0, 8, 0);
    const len = Number(lenBuf.readBigUInt64LE());
    if (len <= 0 || len > 100 * 1024 * 1024) throw new Error(`${file}: bad safetensors header length ${len}`);
    const json = Buffer.alloc(len);
    fs.readSync(fd, json, 0, len, 8);
    return { header: JSON.parse(json.toString("utf8")), dataStart: 8 + len };
  } finally {
    fs.closeSync(fd);
  }
}

// Returns Map<name, {name, dtype, shape, file, offset, nbytes}>.
export function listTensors(modelDir) {
  const single = path.join(modelDir, "model.safetensors");
  const index = path.join(modelDir, "model.safetensors.index.json");
  let files;
  if (fs.existsSync(index)) {
    const weightMap = JSON.parse(fs.readFileSync(index, "utf8")).weight_map ?? {};
    files = [...new Set(Object.values(weightMap))].map((f) => path.join(modelDir, f));
  } else if (fs.existsSync(single)) {
    files = [single];
  } else {
    throw new Error(`${modelDir}: no model.safetensors or model.safetensors.index.json`);
  }
  const tensors = new Map();
  for (const file of files) {
    const { header, dataStart } = readHeader(file);
    for (const [name, info] of Object.entries(header)) {
      if (name === "__metadata__") continue;
      if (!(info.dtype in DTYPE_SIZE)) throw new Error(`${file}: tensor ${name} has unsupported dtype ${info.dtype}`);
      const [begin, end] = info.data_offsets;
      const numel = info.shape.reduce((a, b) => a * b, 1);
      if (end - begin !== numel * DTYPE_SIZE[info.dtype]) {
        throw new Error(`${file}: tensor ${name} byte range does not match its shape`);
      }
      tensors.set(name, { name, dtype: info.dtype, shape: info.shape, file, offset: dataStart + begin, nbytes: end - begin });
    }
  }
  return tensors;
}

export function readRaw(t) {
  const buf = Buffer.alloc(t.nbytes);
  const fd = fs.openSync(t.file, "r");
  try {
    let done = 0;
    while (done < t.nbytes) {
      const n = fs.readSync(fd, buf, done, t.nbytes - done, t.offset + done);
      if (n <= 0) throw new Error(`${t.file}: short read of tensor ${t.name}`);
      done += n;
    }
  } finally {
    fs.closeSync(fd);
  }
  return buf;
}

export function f16ToF32(h) {
  const sign = h & 0x8000 ? -1 : 1;
  const exp = (h >> 10) & 0x1f;
  const mant = h & 0x3ff;
  if (exp === 0) return sign * mant * 2 ** -24;
  if (exp === 0x1f) return mant ? NaN : sign * Infinity;
  return sign * (1 + mant / 1024) * 2 ** (exp - 15);
}

// Converts raw tensor bytes of `dtype` to a Float32Array (exact for f16 and bf16).
export function toF32(raw, dtype) {
  const n = raw.length / DTYPE_SIZE[dtype];
  if (dtype === "F32") {
    const out = new Float32Array(n);
    new Uint8Array(out.buffer).set(raw);
    return out;
  }
  const u16 = new Uint16Array(n);
  new Uint8Array(u16.buffer).set(raw);
  if (dtype === "BF16") {
    const bits = new Uint32Array(n);
    for (let i = 0; i < n; ++i) bits[i] = u16[i] << 16;
    return new Float32Array(bits.buffer);
  }
  const out = new Float32Array(n);
  for (let i = 0; i < n; ++i) out[i] = f16ToF32(u16[i]);
  return out;
}

export function readF32(t) {
  return toF32(readRaw(t), t.dtype);
}
