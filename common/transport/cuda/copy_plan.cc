#include "common/transport/cuda/copy_plan.h"

#include <algorithm>
#include <string>

#include "absl/strings/str_cat.h"

namespace tandem {

std::vector<KvCopy> CoalesceCopies(std::vector<KvCopy> copies) {
  std::vector<KvCopy> out;
  out.reserve(copies.size());
  for (const KvCopy& c : copies) {
    if (c.bytes == 0) continue;
    if (!out.empty()) {
      KvCopy& last = out.back();
      if (last.src_offset + last.bytes == c.src_offset &&
          last.dst_offset + last.bytes == c.dst_offset) {
        last.bytes += c.bytes;
        continue;
      }
    }
    out.push_back(c);
  }
  return out;
}

absl::Status CheckCopyBounds(const std::vector<KvCopy>& copies, uint64_t src_bytes,
                             uint64_t dst_bytes, std::string_view what) {
  for (size_t i = 0; i < copies.size(); ++i) {
    const KvCopy& c = copies[i];
    if (c.src_offset > src_bytes || c.bytes > src_bytes - c.src_offset) {
      return absl::InvalidArgumentError(
          absl::StrCat(std::string(what), ": copy ", i, " source range [", c.src_offset, ", +",
                       c.bytes, ") is outside the ", src_bytes, "-byte local pool"));
    }
    if (c.dst_offset > dst_bytes || c.bytes > dst_bytes - c.dst_offset) {
      return absl::InvalidArgumentError(
          absl::StrCat(std::string(what), ": copy ", i, " destination range [", c.dst_offset, ", +",
                       c.bytes, ") is outside the ", dst_bytes, "-byte remote pool"));
    }
  }
  return absl::OkStatus();
}

std::vector<StagedChunk> PlanStagedChunks(const std::vector<KvCopy>& copies, uint64_t chunk_bytes) {
  std::vector<StagedChunk> chunks;
  for (const KvCopy& copy : copies) {
    uint64_t done = 0;
    while (done < copy.bytes) {
      if (chunks.empty() || chunks.back().bytes == chunk_bytes) chunks.emplace_back();
      StagedChunk& chunk = chunks.back();
      const uint64_t n = std::min(copy.bytes - done, chunk_bytes - chunk.bytes);
      chunk.pieces.push_back({copy.src_offset + done, copy.dst_offset + done, n});
      chunk.bytes += n;
      done += n;
    }
  }
  return chunks;
}

}  // namespace tandem
