// The messages of CudaKvTransport's protocol, carried as notices of its inner transport (UCX).
//
// Writer to owner (each carries the writer's id and its inner transport address for replies):
//   kRequest  {transfer, chunks, time left}: a Write needs `chunks` landing slots.
//   kChunk    {transfer, slot, grant, segments}: the writer put a chunk into `slot` (the inner
//             transport delivers this notice after that put completed); the owner copies each
//             segment (bytes packed back to back from the slot's start) to its pool's
//             dst_offset, then answers kChunkDone.
//   kReturn   {slot, grant}: a granted slot the writer will not use (its Write ended).
//   kNotice   {payload}: the user's notice. The writer sends it only once every earlier Write to
//             this owner has completed (been acknowledged), so the owner delivers it at once.
// Owner to writer:
//   kGrant     {transfer, (slot, grant)...}: slots the writer may put chunks of `transfer` into.
//   kChunkDone {transfer, slot, status}: the chunk is in the owner's pool (or why not).
//
// No message depends on the order the inner transport delivers notices in (UCX does not keep
// notices to one peer in order): each stands alone, keyed by transfer, slot and grant number.
#ifndef TANDEM_COMMON_TRANSPORT_CUDA_STAGED_MESSAGES_H_
#define TANDEM_COMMON_TRANSPORT_CUDA_STAGED_MESSAGES_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace tandem {

enum class StagedMessageType : uint8_t {
  kRequest = 1,
  kChunk = 2,
  kReturn = 3,
  kNotice = 4,
  kGrant = 5,
  kChunkDone = 6,
};

// One piece of a chunk: `bytes` bytes at the next position in the slot go to the owner pool's
// [dst_offset, dst_offset + bytes).
struct StagedSegment {
  uint64_t dst_offset = 0;
  uint64_t bytes = 0;
  bool operator==(const StagedSegment&) const = default;
};

struct SlotGrant {
  uint32_t slot = 0;
  uint64_t grant = 0;  // the owner's number for this grant of the slot (never reused)
  bool operator==(const SlotGrant&) const = default;
};

struct StagedMessage {
  StagedMessageType type = StagedMessageType::kNotice;
  uint64_t writer_id = 0;               // the writing transport's random id
  std::string reply_address;            // writer to owner: the writer's inner transport address
  uint64_t transfer = 0;                // the writer's number for one Write
  uint32_t chunks = 0;                  // kRequest
  int64_t time_left_ms = 0;             // kRequest: until the Write's deadline
  std::vector<SlotGrant> grants;        // kGrant (several), kChunk/kReturn (one)
  std::vector<StagedSegment> segments;  // kChunk
  absl::Status status;                  // kChunkDone
  std::string payload;                  // kNotice

  bool operator==(const StagedMessage&) const = default;
};

std::string EncodeStagedMessage(const StagedMessage& message);
// InvalidArgument when `bytes` is not a well-formed message (names what is wrong).
absl::StatusOr<StagedMessage> DecodeStagedMessage(std::string_view bytes);

const char* StagedMessageTypeName(StagedMessageType type);

}  // namespace tandem

#endif  // TANDEM_COMMON_TRANSPORT_CUDA_STAGED_MESSAGES_H_
