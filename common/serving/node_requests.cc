#include "common/serving/node_requests.h"

namespace tandem {

void RouterRequestIds::Track(const std::string& router_id, RequestId id) {
  if (router_id.empty()) return;
  absl::MutexLock lock(&mu_);
  ids_[router_id] = id;
}

void RouterRequestIds::Untrack(const std::string& router_id) {
  if (router_id.empty()) return;
  absl::MutexLock lock(&mu_);
  ids_.erase(router_id);
}

std::optional<RequestId> RouterRequestIds::Find(const std::string& router_id) {
  absl::MutexLock lock(&mu_);
  auto it = ids_.find(router_id);
  if (it == ids_.end()) return std::nullopt;
  return it->second;
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
}

}  // namespace tandem
