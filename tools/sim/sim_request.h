// What tandem-sim's router keeps per request (sim_cluster.cc): the request's times at the client
// and its current attempt. Its view of the nodes is sim_router.h's.
#ifndef TANDEM_TOOLS_SIM_SIM_REQUEST_H_
#define TANDEM_TOOLS_SIM_SIM_REQUEST_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "bench/serve/bench_request.h"
#include "bench/serve/datasets.h"
#include "router/placement.h"
#include "tools/sim/sim_node.h"

namespace tandem::sim {

// A node's key for one attempt of request `index`: attempts of one request never share a key, so
// what a node still reports for an abandoned attempt is recognised and dropped.
inline constexpr int kAttemptBits = 4;
inline constexpr int kMaxAttempts = 1 << kAttemptBits;
inline uint64_t NodeKey(size_t index, int attempt) {
  return (static_cast<uint64_t>(index) << kAttemptBits) | static_cast<uint64_t>(attempt);
}
inline size_t RequestOf(uint64_t key) { return static_cast<size_t>(key >> kAttemptBits); }
inline int AttemptOf(uint64_t key) { return static_cast<int>(key & (kMaxAttempts - 1)); }

struct RequestState {
  int64_t sent = 0;  // the client's send time
  // The prompt's ids while the router needs them: built when the request is first placed (and
  // again for a retry after it was handed on), moved to the node that computes it, freed when the
  // request ends.
  std::vector<int32_t> prompt;
  int32_t prompt_len = 0;
  int32_t output_len = 0;
  // The tokens at the client, over all attempts: how many, the first's and the last's times, and
  // the gaps between consecutive ones (seconds, kept as they come: the report's ITLs).
  int32_t num_tokens = 0;
  int64_t first_token_at = 0;
  int64_t last_token_at = 0;
  std::vector<double> itl_s;
  // The current attempt: its number (retries and migrations count), where it runs, how far the
  // disaggregated handoff got.
  int attempt = 0;
  int migrations = 0;
  PlacementKind kind = PlacementKind::kColocated;
  int prefill = -1;
  int decode = -1;
  // The router replica placing it (its arrival order modulo the replicas), and the sequence
  // numbers of its placements on the two nodes (SimRouter's receipts).
  int router = 0;
  uint64_t prefill_seq = 0;
  uint64_t decode_seq = 0;
  SimNode* prefill_node = nullptr;
  SimNode* decode_node = nullptr;
  int32_t decode_cached_blocks = 0;
  int writes = 0;
  bool reserved = false;
  bool prefilled = false;
  bool completed = false;
  // Nodes an earlier attempt blamed, (is prefill, index): avoided while others are up.
  std::vector<std::pair<bool, int>> avoid;
  bool done = false;
  bool ok = false;
  std::string error;

  // A token reached the client at `at` (loop nanoseconds).
  void NoteToken(int64_t at);

  void NewAttempt() {
    ++attempt;
    prefill = decode = -1;
    prefill_node = decode_node = nullptr;
    decode_cached_blocks = 0;
    writes = 0;
    reserved = prefilled = completed = false;
  }
};

// Request `index`'s prompt ids: the trace's (prompt_ids, or the trace line's deferred prompt), or
// for a text prompt stand-in ids of its length, its own per request. The vector has room for
// `capacity` ids (the sequence's whole length: its tokens are appended without a copy).
std::vector<int32_t> PromptIds(const bench::BenchRequest& request, size_t index,
                               size_t capacity = 0);
// What the current attempt of request `index` computes: its prompt, then (a migrated request)
// stand-ins for the tokens it sent so far. Takes s.prompt when no token was sent (the prompt is
// built again if the router needs it later); copies it otherwise.
std::vector<int32_t> TakeAttemptPrompt(RequestState& s, size_t index);
// A copy of s.prompt with room for the whole sequence.
std::vector<int32_t> CopyPrompt(const RequestState& s);
// The request as tandem-bench's client saw it (its ITLs moved out of `s`).
bench::RequestResult ResultOf(RequestState&& s);

}  // namespace tandem::sim

#endif  // TANDEM_TOOLS_SIM_SIM_REQUEST_H_
