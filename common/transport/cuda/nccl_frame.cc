#include "common/transport/cuda/nccl_frame.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/transport/cuda/byte_codec.h"

namespace tandem {

size_t NcclFrameMaxRuns(size_t frame_bytes) {
  return frame_bytes < kNcclFrameHeaderBytes ? 0 : (frame_bytes - kNcclFrameHeaderBytes) / 16;
}

size_t NcclFrameMaxPayload(size_t frame_bytes) {
  return frame_bytes < kNcclFrameHeaderBytes ? 0 : frame_bytes - kNcclFrameHeaderBytes;
}

absl::Status EncodeNcclFrame(const NcclFrame& frame, char* out, size_t frame_bytes) {
  if (frame_bytes < kNcclMinFrameBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("NCCL frame of ", frame_bytes, " bytes: the minimum is ", kNcclMinFrameBytes));
  }
  std::string bytes;
  bytes.reserve(frame_bytes);
  transport_wire::ByteWriter w(&bytes);
  w.U32(kNcclFrameMagic);
  w.U8(kNcclFrameVersion);
  w.U8(static_cast<uint8_t>(frame.type));
  w.U16(0);
  w.U64(frame.sequence);
  if (frame.type == NcclFrameType::kCopies) {
    if (frame.runs.size() > NcclFrameMaxRuns(frame_bytes)) {
      return absl::InvalidArgumentError(
          absl::StrCat(frame.runs.size(), " runs do not fit a ", frame_bytes, "-byte NCCL frame"));
    }
    w.U32(static_cast<uint32_t>(frame.runs.size()));
    for (const NcclRun& r : frame.runs) {
      w.U64(r.dst_offset);
      w.U64(r.bytes);
    }
  } else {
    if (frame.payload.size() > NcclFrameMaxPayload(frame_bytes)) {
      return absl::InvalidArgumentError(absl::StrCat("a ", frame.payload.size(),
                                                     "-byte notice does not fit a ", frame_bytes,
                                                     "-byte NCCL frame"));
    }
    w.U32(static_cast<uint32_t>(frame.payload.size()));
    bytes.append(frame.payload);
  }
  std::memcpy(out, bytes.data(), bytes.size());
  std::memset(out + bytes.size(), 0, frame_bytes - bytes.size());
  return absl::OkStatus();
}

absl::StatusOr<NcclFrame> DecodeNcclFrame(std::string_view bytes) {
  transport_wire::ByteReader r(bytes);
  uint32_t magic = 0;
  uint8_t version = 0, type = 0;
  uint16_t reserved = 0;
  uint32_t count = 0;
  NcclFrame frame;
  if (!r.U32(&magic) || magic != kNcclFrameMagic) {
    return absl::InvalidArgumentError("not an NCCL KV frame (bad magic)");
  }
  if (!r.U8(&version) || version != kNcclFrameVersion) {
    return absl::InvalidArgumentError(
        absl::StrCat("NCCL KV frame version ", version, ", expected ", kNcclFrameVersion));
  }
  if (!r.U8(&type) || (type != static_cast<uint8_t>(NcclFrameType::kCopies) &&
                       type != static_cast<uint8_t>(NcclFrameType::kNotice))) {
    return absl::InvalidArgumentError(absl::StrCat("NCCL KV frame of unknown type ", type));
  }
  frame.type = static_cast<NcclFrameType>(type);
  if (!r.U16(&reserved) || !r.U64(&frame.sequence) || !r.U32(&count)) {
    return absl::InvalidArgumentError("NCCL KV frame is truncated");
  }
  if (frame.type == NcclFrameType::kCopies) {
    if (count > r.remaining() / 16) {
      return absl::InvalidArgumentError(
          absl::StrCat("NCCL KV frame claims ", count, " runs, more than it holds"));
    }
    frame.runs.resize(count);
    for (NcclRun& run : frame.runs) {
      r.U64(&run.dst_offset);
      r.U64(&run.bytes);
    }
  } else {
    if (count > r.remaining()) {
      return absl::InvalidArgumentError(
          absl::StrCat("NCCL KV frame claims a ", count, "-byte notice, more than it holds"));
    }
    const size_t at = bytes.size() - r.remaining();
    frame.payload.assign(bytes.data() + at, count);
  }
  return frame;
}

namespace {
constexpr uint32_t kNcclPoolKeyMagic = 0x4e564b54;  // "TKVN" little-endian
constexpr uint16_t kNcclPoolKeyVersion = 1;
}  // namespace

std::string EncodeNcclPoolKey(const NcclPoolKey& key) {
  std::string out;
  transport_wire::ByteWriter w(&out);
  w.U32(kNcclPoolKeyMagic);
  w.U16(kNcclPoolKeyVersion);
  w.U64(key.pool_bytes);
  w.U64(key.incarnation);
  return out;
}

absl::StatusOr<NcclPoolKey> DecodeNcclPoolKey(std::string_view bytes) {
  transport_wire::ByteReader r(bytes);
  uint32_t magic = 0;
  uint16_t version = 0;
  NcclPoolKey key;
  if (!r.U32(&magic) || magic != kNcclPoolKeyMagic || !r.U16(&version) ||
      version != kNcclPoolKeyVersion || !r.U64(&key.pool_bytes) || !r.U64(&key.incarnation) ||
      r.remaining() != 0) {
    return absl::InvalidArgumentError("not an NCCL pool key of this version");
  }
  return key;
}

std::vector<NcclFrame> PlanNcclCopyFrames(const std::vector<KvCopy>& copies, size_t frame_bytes,
                                          uint64_t first_sequence) {
  std::vector<NcclFrame> frames;
  const size_t per_frame = std::max<size_t>(1, NcclFrameMaxRuns(frame_bytes));
  for (size_t i = 0; i < copies.size(); i += per_frame) {
    NcclFrame frame;
    frame.type = NcclFrameType::kCopies;
    frame.sequence = first_sequence + frames.size();
    const size_t end = std::min(copies.size(), i + per_frame);
    for (size_t j = i; j < end; ++j) frame.runs.push_back({copies[j].dst_offset, copies[j].bytes});
    frames.push_back(std::move(frame));
  }
  return frames;
}

}  // namespace tandem
