#include "common/transport/cuda/staged_messages.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "common/transport/cuda/byte_codec.h"

namespace tandem {

namespace {

constexpr uint8_t kMagic = 0xd7;
constexpr uint8_t kVersion = 1;
constexpr size_t kMaxAddressBytes = 64 * 1024;
constexpr size_t kMaxMessageBytes = 64 * 1024;
constexpr size_t kMaxPayloadBytes = 64 * 1024 * 1024;
// Far more than any chunk or grant needs; bounds what a corrupt count can make us allocate.
constexpr uint32_t kMaxListEntries = 1 << 20;

bool KnownType(uint8_t t) {
  return t >= static_cast<uint8_t>(StagedMessageType::kRequest) &&
         t <= static_cast<uint8_t>(StagedMessageType::kChunkDone);
}

}  // namespace

const char* StagedMessageTypeName(StagedMessageType type) {
  switch (type) {
    case StagedMessageType::kRequest:
      return "request";
    case StagedMessageType::kChunk:
      return "chunk";
    case StagedMessageType::kReturn:
      return "return";
    case StagedMessageType::kNotice:
      return "notice";
    case StagedMessageType::kGrant:
      return "grant";
    case StagedMessageType::kChunkDone:
      return "chunk-done";
  }
  return "unknown";
}

std::string EncodeStagedMessage(const StagedMessage& m) {
  std::string out;
  transport_wire::ByteWriter w(&out);
  w.U8(kMagic);
  w.U8(kVersion);
  w.U8(static_cast<uint8_t>(m.type));
  w.U64(m.writer_id);
  w.Bytes(m.reply_address);
  w.U64(m.transfer);
  w.U32(m.chunks);
  w.I64(m.time_left_ms);
  w.U32(static_cast<uint32_t>(m.grants.size()));
  for (const SlotGrant& g : m.grants) {
    w.U32(g.slot);
    w.U64(g.grant);
  }
  w.U32(static_cast<uint32_t>(m.segments.size()));
  for (const StagedSegment& s : m.segments) {
    w.U64(s.dst_offset);
    w.U64(s.bytes);
  }
  w.U32(static_cast<uint32_t>(m.status.code()));
  w.Bytes(std::string(m.status.message()));
  w.Bytes(m.payload);
  return out;
}

absl::StatusOr<StagedMessage> DecodeStagedMessage(std::string_view bytes) {
  transport_wire::ByteReader r(bytes);
  uint8_t magic = 0, version = 0, type = 0;
  if (!r.U8(&magic) || magic != kMagic) {
    return absl::InvalidArgumentError("not a staged transport message (bad magic)");
  }
  if (!r.U8(&version) || version != kVersion) {
    return absl::InvalidArgumentError(
        absl::StrCat("staged transport message version ", version, ", expected ", kVersion));
  }
  if (!r.U8(&type) || !KnownType(type)) {
    return absl::InvalidArgumentError(
        absl::StrCat("staged transport message of unknown type ", type));
  }
  StagedMessage m;
  m.type = static_cast<StagedMessageType>(type);
  auto truncated = [&m] {
    return absl::InvalidArgumentError(absl::StrCat("staged transport ",
                                                   StagedMessageTypeName(m.type),
                                                   " message is truncated or has a bad length"));
  };
  uint32_t n = 0;
  if (!r.U64(&m.writer_id) || !r.Bytes(&m.reply_address, kMaxAddressBytes) || !r.U64(&m.transfer) ||
      !r.U32(&m.chunks) || !r.I64(&m.time_left_ms) || !r.U32(&n) || n > kMaxListEntries ||
      n > r.remaining() / 12) {
    return truncated();
  }
  m.grants.resize(n);
  for (SlotGrant& g : m.grants) {
    if (!r.U32(&g.slot) || !r.U64(&g.grant)) return truncated();
  }
  if (!r.U32(&n) || n > kMaxListEntries || n > r.remaining() / 16) return truncated();
  m.segments.resize(n);
  for (StagedSegment& s : m.segments) {
    if (!r.U64(&s.dst_offset) || !r.U64(&s.bytes)) return truncated();
  }
  uint32_t code = 0;
  std::string message;
  if (!r.U32(&code) || code > static_cast<uint32_t>(absl::StatusCode::kUnauthenticated) ||
      !r.Bytes(&message, kMaxMessageBytes) || !r.Bytes(&m.payload, kMaxPayloadBytes)) {
    return truncated();
  }
  m.status = absl::Status(static_cast<absl::StatusCode>(code), message);
  if (r.remaining() != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("staged transport message has ", r.remaining(), " trailing bytes"));
  }
  return m;
}

}  // namespace tandem
