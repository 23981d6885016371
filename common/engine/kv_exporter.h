// The engine's side of a prefill node's KV export: a prefill-only request hands each finished
// piece of its KV to a KvExporter, which ships it (common/handoff/kv_block_writer.h).
//
// Ownership: from the request's first OnBlocksReady until the exporter calls
// Engine::ReleaseExportedBlocks(id), the engine keeps every block it passed out allocated and
// unchanged — even after the request finished or was cancelled — so a write in flight never reads a
// block that was handed to someone else. The exporter calls ReleaseExportedBlocks exactly once,
// after OnPrefillDone or OnAborted, when none of its writes reads local memory any more.
#ifndef TANDEM_COMMON_ENGINE_KV_EXPORTER_H_
#define TANDEM_COMMON_ENGINE_KV_EXPORTER_H_

#include <cstdint>
#include <span>

#include "absl/status/status.h"
#include "common/engine/request.h"

namespace tandem {

class KvExporter {
 public:
  virtual ~KvExporter() = default;

  // Engine thread; must not block. The request's blocks table[first_index, first_index +
  // blocks.size()) hold final KV (full blocks while prefilling; with the last call before
  // OnPrefillDone, the prompt's last, possibly partly filled, block). Each index is passed once,
  // in increasing order.
  virtual void OnBlocksReady(RequestId id, int32_t first_index,
                             std::span<const int32_t> blocks) = 0;
  // Engine thread. The prompt is computed and its first token sampled (`first_token.token`,
  // logprobs if asked); `rng_counter` is the request's random draws so far, for the decode node to
  // continue from.
  virtual void OnPrefillDone(const GenerationEvent& first_token, uint64_t rng_counter) = 0;
  // Engine thread. The request ended before its first token: cancelled, engine stopped, or a
  // backend error (`status`).
  virtual void OnAborted(RequestId id, const absl::Status& status) = 0;
};

}  // namespace tandem

#endif  // TANDEM_COMMON_ENGINE_KV_EXPORTER_H_
