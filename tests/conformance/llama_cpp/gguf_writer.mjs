// A minimal GGUF v3 writer: metadata key/values, tensor infos, aligned tensor data.
//
// Layout (all little-endian): magic "GGUF", u32 version, u64 tensor count, u64 kv count,
// the key/values, the tensor infos (name, n_dims, dims fastest-varying first, ggml type,
// offset into the data section), padding to the alignment, then the tensor data, each tensor
// starting at an aligned offset.
import fs from "node:fs";

export const GGUF_ALIGNMENT = 32;

// gguf_type
export const ValueType = Object.freeze({
  U8: 0, I8: 1, U16: 2, I16: 3, U32: 4, I32: 5, F32: 6, BOOL: 7, STRING: 8, ARRAY: 9,
  U64: 10, I64: 11, F64: 12,
});

// ggml_type (only the unquantized ones we write)
export const GgmlType = Object.freeze({ F32: 0, F16: 1, BF16: 30 });
export const GgmlTypeSize = Object.freeze({ 0: 4, 1: 2, 30: 2 });

// Typed metadata values: kv("llama.block_count", u32(2)).
export const u32 = (v) => ({ type: ValueType.U32, value: v });
export const i32 = (v) => ({ type: ValueType.I32, value: v });
export const f32 = (v) => ({ type: ValueType.F32, value: v });
export const bool = (v) => ({ type: ValueType.BOOL, value: v });
export const str = (v) => ({ type: ValueType.STRING, value: v });
export const arr = (elemType, values) => ({ type: ValueType.ARRAY, elemType, value: values });

// Appends little-endian primitives to a growing list of Buffers.
class ByteSink {
  constructor() {
    this.chunks = [];
    this.length = 0;
    this.scratch = Buffer.alloc(8);
  }
  push(buf) {
    this.chunks.push(buf);
    this.length += buf.length;
  }
  u32(v) {
    const b = Buffer.alloc(4);
    b.writeUInt32LE(v);
    this.push(b);
  }
  u64(v) {
    const b = Buffer.alloc(8);
    b.writeBigUInt64LE(BigInt(v));
    this.push(b);
  }
  string(s) {
    const bytes = Buffer.from(s, "utf8");
    this.u64(bytes.length);
    this.push(bytes);
  }
  scalar(type, v) {
    let b;
    switch (type) {
      case ValueType.U8: b = Buffer.alloc(1); b.writeUInt8(v); break;
      case ValueType.I8: b = Buffer.alloc(1); b.writeInt8(v); break;
      case ValueType.U16: b = Buffer.alloc(2); b.writeUInt16LE(v); break;
      case ValueType.I16: b = Buffer.alloc(2); b.writeInt16LE(v); break;
      case ValueType.U32: b = Buffer.alloc(4); b.writeUInt32LE(v); break;
      case ValueType.I32: b = Buffer.alloc(4); b.writeInt32LE(v); break;
      case ValueType.F32: b = Buffer.alloc(4); b.writeFloatLE(v); break;
      case ValueType.BOOL: b = Buffer.alloc(1); b.writeUInt8(v ? 1 : 0); break;
      case ValueType.U64: b = Buffer.alloc(8); b.writeBigUInt64LE(BigInt(v)); break;
      case ValueType.I64: b = Buffer.alloc(8); b.writeBigInt64LE(BigInt(v)); break;
      case ValueType.F64: b = Buffer.alloc(8); b.writeDoubleLE(v); break;
      case ValueType.STRING: this.string(v); return;
      default: throw new Error(`unsupported GGUF scalar type ${type}`);
    }
    this.push(b);
  }
  // Writes a whole array of one element type; numbers go through one typed buffer.
  array(elemType, values) {
    this.u32(elemType);
    this.u64(values.length);
    if (elemType === ValueType.STRING) {
      for (const s of values) this.string(s);
      return;
    }
    const typed = {
      [ValueType.U32]: Uint32Array, [ValueType.I32]: Int32Array, [ValueType.F32]: Float32Array,
    }[elemType];
    if (typed) {
      this.push(Buffer.from(typed.from(values).buffer));
      return;
    }
    for (const v of values) this.scalar(elemType, v);
  }
  toBuffer() {
    return Buffer.concat(this.chunks, this.length);
  }
}

const alignUp = (n, a) => Math.ceil(n / a) * a;

function writeAll(fd, buf) {
  let done = 0;
  while (done < buf.length) done += fs.writeSync(fd, buf, done, buf.length - done);
}

// Writes a GGUF file.
//   metadata: Array<[key, {type, value, elemType?}]> in the order they should appear.
//   tensors: Array<{name, dims (fastest-varying first), ggmlType, nbytes, data: () => Buffer}>;
//            data() is called once, in order, so big tensors are produced one at a time.
export function writeGguf(path, metadata, tensors) {
  const head = new ByteSink();
  head.push(Buffer.from("GGUF", "ascii"));
  head.u32(3);
  head.u64(tensors.length);
  head.u64(metadata.length);
  for (const [key, v] of metadata) {
    head.string(key);
    head.u32(v.type);
    if (v.type === ValueType.ARRAY) head.array(v.elemType, v.value);
    else head.scalar(v.type, v.value);
  }
  let offset = 0;
  const offsets = [];
  for (const t of tensors) {
    offset = alignUp(offset, GGUF_ALIGNMENT);
    offsets.push(offset);
    head.string(t.name);
    head.u32(t.dims.length);
    for (const d of t.dims) head.u64(d);
    head.u32(t.ggmlType);
    head.u64(offset);
    offset += t.nbytes;
  }
  const headBuf = head.toBuffer();
  const fd = fs.openSync(path, "w");
  try {
    writeAll(fd, headBuf);
    const dataStart = alignUp(headBuf.length, GGUF_ALIGNMENT);
    writeAll(fd, Buffer.alloc(dataStart - headBuf.length));
    let written = 0;
    tensors.forEach((t, i) => {
      if (offsets[i] > written) writeAll(fd, Buffer.alloc(offsets[i] - written));
      const data = t.data();
      if (data.length !== t.nbytes) {
        throw new Error(`tensor ${t.name}: produced ${data.length} bytes, expected ${t.nbytes}`);
      }
      writeAll(fd, data);
      written = offsets[i] + data.length;
    });
  } finally {
    fs.closeSync(fd);
  }
}
