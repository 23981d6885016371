#include "common/serving/node_requests.h"

#include "absl/strings/str_cat.h"

namespace tandem {

absl::Status RouterRequestIds::Claim(const std::string& router_id) {
  if (router_id.empty()) return absl::OkStatus();
  absl::MutexLock lock(&mu_);
  if (!ids_.try_emplace(router_id).second) {
    return absl::AlreadyExistsError(
        absl::StrCat("request id \"", router_id, "\" is already in use on this node"));
  }
  return absl::OkStatus();
}

bool RouterRequestIds::Bind(const std::string& router_id, RequestId id) {
  if (router_id.empty()) return true;
  absl::MutexLock lock(&mu_);
  Entry& entry = ids_[router_id];
  entry.id = id;
  return !entry.cancel_requested;
}

void RouterRequestIds::Release(const std::string& router_id) {
  if (router_id.empty()) return;
  absl::MutexLock lock(&mu_);
  ids_.erase(router_id);
}

RouterRequestIds::CancelTarget RouterRequestIds::ForCancel(const std::string& router_id) {
  absl::MutexLock lock(&mu_);
  auto it = ids_.find(router_id);
  if (it == ids_.end()) return {};
  if (!it->second.id.has_value()) it->second.cancel_requested = true;
  return {.found = true, .id = it->second.id};
}

RouterRequestIds::CancelTarget RouterRequestIds::ForMigration(const std::string& router_id,
                                                              PauseIntent intent) {
  absl::MutexLock lock(&mu_);
  auto it = ids_.find(router_id);
  if (it == ids_.end()) return {};
  if (intent != PauseIntent::kNone) it->second.pause_requested = intent == PauseIntent::kPause;
  return {.found = true, .id = it->second.id};
}

std::vector<RequestId> RouterRequestIds::PauseAll() {
  absl::MutexLock lock(&mu_);
  pause_all_ = true;
  std::vector<RequestId> bound;
  for (const auto& [router_id, entry] : ids_) {
    if (entry.id.has_value()) bound.push_back(*entry.id);
  }
  return bound;
}

bool RouterRequestIds::PauseRequested(const std::string& router_id) {
  if (router_id.empty()) return false;  // untracked: no migration RPC can name it
  absl::MutexLock lock(&mu_);
  if (pause_all_) return true;
  auto it = ids_.find(router_id);
  return it != ids_.end() && it->second.pause_requested;
}

void FillNodeLoad(const Engine& engine, std::string_view role, uint64_t incarnation,
                  const std::string& model, v1::NodeLoad* load) {
  const EngineStats stats = engine.Stats();
  load->set_role(std::string(role));
  load->set_incarnation(incarnation);
  load->set_model(model);
  load->set_block_size(engine.kv_layout().block_size);
  load->set_num_kv_blocks(stats.num_kv_blocks);
  load->set_num_free_kv_blocks(stats.num_free_kv_blocks);
  load->set_num_running(stats.num_running);
  load->set_num_waiting(stats.num_waiting + stats.num_pending_reservations);
  load->set_num_queued_tokens(stats.num_queued_prompt_tokens);
  load->set_max_context_tokens(engine.max_context_tokens());
  load->set_num_awaiting_kv(stats.num_awaiting_kv);
  load->set_num_finished_requests(stats.num_finished_requests);
  load->set_num_imported_requests(stats.num_imported_requests);
  v1::StepCost* cost = load->mutable_step_cost();
  cost->set_per_step_us(stats.step_cost.per_step_us);
  cost->set_per_token_us(stats.step_cost.per_token_us);
  cost->set_per_context_token_us(stats.step_cost.per_context_token_us);
  cost->set_samples(stats.step_cost.samples);
  load->set_num_context_tokens(stats.num_context_tokens);
  load->set_max_num_batched_tokens(stats.max_num_batched_tokens);
  load->set_max_num_seqs(stats.max_num_seqs);
  load->set_kv_bytes_per_token(static_cast<int64_t>(engine.kv_layout().bytes_per_token()));
  // From the same snapshot as the load above (EngineStats::receipts).
  for (const PlacementReceipt& receipt : stats.receipts) {
    v1::RouterReceipt* r = load->add_receipts();
    r->set_router_id(receipt.router_id);
    r->set_received(receipt.received);
  }
  load->set_max_router_receipts(stats.max_receipts);
}

PlacementTag PlacementTagFromProto(const v1::PlacementTag& tag) {
  return PlacementTag{.router_id = tag.router_id(), .seq = tag.seq()};
}

}  // namespace tandem
