// How the device-pool transports turn one Write's copies into work: merging neighbours, checking
// bounds, and (staged path) packing the copies into fixed-size chunks that each fit one staging
// buffer and one landing slot. Pure functions; pure C++.
#ifndef TANDEM_COMMON_TRANSPORT_CUDA_COPY_PLAN_H_
#define TANDEM_COMMON_TRANSPORT_CUDA_COPY_PLAN_H_

#include <cstdint>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "common/transport/kv_transport.h"

namespace tandem {

// Drops empty copies and merges each copy into the one before it when both its source and its
// destination start where the previous one's end. Keeps the order otherwise.
std::vector<KvCopy> CoalesceCopies(std::vector<KvCopy> copies);

// OK when every copy's source lies in [0, src_bytes) and destination in [0, dst_bytes); else
// InvalidArgument naming `what`, the copy and the pool sizes.
absl::Status CheckCopyBounds(const std::vector<KvCopy>& copies, uint64_t src_bytes,
                             uint64_t dst_bytes, std::string_view what);

// One chunk of the staged path: `pieces` are packed back to back from the chunk's first byte
// (piece i starts at the sum of the earlier pieces' bytes), `bytes` in all, at most the chunk size.
struct StagedChunk {
  std::vector<KvCopy> pieces;  // src_offset: the local pool; dst_offset: the owner's pool
  uint64_t bytes = 0;
};

// Packs `copies` (in order) into chunks of at most `chunk_bytes`, splitting copies that cross a
// chunk's end. chunk_bytes must be > 0.
std::vector<StagedChunk> PlanStagedChunks(const std::vector<KvCopy>& copies, uint64_t chunk_bytes);

}  // namespace tandem

#endif  // TANDEM_COMMON_TRANSPORT_CUDA_COPY_PLAN_H_
