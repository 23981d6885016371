// RequestRunner's wait for KV room (request_runner.h, WaitForKvRoom): a request for which no
// decode node reports room waits in a bounded queue, for a bounded time, then gets UNAVAILABLE.
#include <algorithm>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "router/client_errors.h"
#include "router/kv_admission.h"
#include "router/request_runner.h"
#include "spdlog/spdlog.h"

namespace tandem {
namespace {

// How often a request waiting for KV room looks at the decode nodes' load reports again.
constexpr absl::Duration kKvWaitPoll = absl::Milliseconds(10);

}  // namespace

std::optional<grpc::Status> RequestRunner::WaitForKvRoom(const RouterRequest& request,
                                                         CallGuard& guard) {
  const int64_t prompt_tokens = static_cast<int64_t>(request.prompt.size());
  auto room = [&] {
    std::vector<v1::NodeLoad> loads;
    for (const auto& node : pool_->UpNodes(NodeRole::kDecode)) {
      loads.push_back(node->snapshot().load);
    }
    return DecodeKvRoom(loads, prompt_tokens);
  };
  if (room() != KvRoom::kFull) return std::nullopt;
  ++counters_->kv_waits;
  if (waiting_for_kv_.fetch_add(1) >= options_.max_kv_waiting_requests) {
    waiting_for_kv_.fetch_sub(1);
    ++counters_->kv_wait_refusals;
    return grpc::Status(
        grpc::StatusCode::UNAVAILABLE,
        WithRequestId(absl::StrCat("the decode nodes' KV cache is full and ",
                                   options_.max_kv_waiting_requests,
                                   " requests are already waiting for room; retry later"),
                      request.request_id));
  }
  absl::Cleanup leave = [&] { waiting_for_kv_.fetch_sub(1); };
  const absl::Time give_up =
      std::min(guard.deadline(), clock_->Now() + absl::Milliseconds(options_.kv_wait_timeout_ms));
  while (room() == KvRoom::kFull) {
    if (guard.client_cancelled()) {
      return grpc::Status(grpc::StatusCode::CANCELLED, "the client cancelled");
    }
    if (clock_->Now() >= give_up) {
      ++counters_->kv_wait_refusals;
      spdlog::warn("{}: no decode node had room for {} prompt tokens within {} ms",
                   request.request_id, prompt_tokens, options_.kv_wait_timeout_ms);
      return grpc::Status(
          grpc::StatusCode::UNAVAILABLE,
          WithRequestId(
              absl::StrCat("no decode node had free KV cache for this prompt of ", prompt_tokens,
                           " tokens within ", options_.kv_wait_timeout_ms, " ms; retry later"),
              request.request_id));
    }
    absl::SleepFor(kKvWaitPoll);
  }
  return std::nullopt;
}

}  // namespace tandem
