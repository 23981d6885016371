#include "tools/sim/sim_router.h"

#include <algorithm>

namespace tandem::sim {

SimRouter::SimRouter(PlacementOptions options, bool receipts, int64_t expiry_nanos, int num_prefill,
                     int num_decode)
    : placer_(options),
      receipts_(receipts),
      expiry_nanos_(expiry_nanos),
      prefill_views_(num_prefill),
      decode_views_(num_decode) {}

void SimRouter::Report(bool prefill, int j, const SimNodeLoad& load, int64_t now) {
  SimNodeView& v = Views(prefill)[j];
  v.load = load;
  v.down = false;
  // The node's receipt: how many of the remembered placements it had taken in.
  size_t received = 0;
  for (const SimPlaced& p : v.pending) received += p.delivered_at <= load.published_at;
  if (!receipts_) received = v.pending.size();
  v.pending.erase(v.pending.begin(), v.pending.begin() + static_cast<ptrdiff_t>(received));
  std::erase_if(v.pending, [&](const SimPlaced& p) { return p.placed_at + expiry_nanos_ < now; });
  v.pending_tokens = v.pending_blocks = v.pending_context = 0;
  for (const SimPlaced& p : v.pending) {
    v.pending_tokens += p.queued_tokens;
    v.pending_blocks += p.blocks;
    v.pending_context += p.context_tokens;
  }
}

void SimRouter::MarkDown(bool prefill, int j) {
  SimNodeView& v = Views(prefill)[j];
  const uint64_t next_seq = v.next_seq;
  v = SimNodeView{};  // a node back from the dead starts empty: nothing sent before counts
  v.next_seq = next_seq;
  v.down = true;
}

uint64_t SimRouter::NotePlaced(bool prefill, int j, SimPlaced placed) {
  SimNodeView& v = Views(prefill)[j];
  placed.seq = v.next_seq++;
  v.last_placed_at = std::max(v.last_placed_at, placed.placed_at);
  v.pending.push_back(placed);
  v.pending_tokens += placed.queued_tokens;
  v.pending_blocks += placed.blocks;
  v.pending_context += placed.context_tokens;
  return placed.seq;
}

void SimRouter::NoteDelivered(bool prefill, int j, uint64_t seq, int64_t at) {
  std::deque<SimPlaced>& pending = Views(prefill)[j].pending;
  auto it = std::lower_bound(pending.begin(), pending.end(), seq,
                             [](const SimPlaced& p, uint64_t s) { return p.seq < s; });
  if (it != pending.end() && it->seq == seq) it->delivered_at = at;
}

NodeCandidate SimRouter::Candidate(bool prefill, int j, const std::string& name) const {
  const SimNodeView& v = Views(prefill)[j];
  const int64_t pending_requests = static_cast<int64_t>(v.pending.size());
  return NodeCandidate{
      .index = j,
      .address = name,
      .free_kv_blocks = v.load.num_free_kv_blocks - v.pending_blocks,
      .queued_tokens = v.load.num_queued_tokens + v.pending_tokens,
      .num_sequences = v.load.num_running + v.load.num_waiting +
                       (prefill ? 0 : v.load.num_awaiting_kv) + pending_requests,
      .step_cost = v.load.step_cost,
      .num_running = v.load.num_running,
      .context_tokens = v.load.num_context_tokens + v.pending_context,
      .max_batched_tokens = v.load.max_batched_tokens,
      .max_num_seqs = v.load.max_num_seqs,
      .num_kv_blocks = v.load.num_kv_blocks,
      .block_size = v.load.block_size,
      .waiting_blocks = WaitingBlocks(v.load.num_queued_tokens, v.load.block_size),
      .last_placed_ns = v.last_placed_at,
  };
}

NodeCandidate SimRouter::AutoPrefillCandidate(int j, const std::string& name) const {
  NodeCandidate c = Candidate(false, j, name);
  const SimNodeView& v = decode_views_[j];
  c.num_sequences -= v.load.num_awaiting_kv;  // a prefill candidate's count, as Place's
  return c;
}

int64_t SimRouter::block_size(int decode_index) const {
  return std::max(1, decode_views_[decode_index].load.block_size);
}

}  // namespace tandem::sim
