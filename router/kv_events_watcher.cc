#include "router/kv_events_watcher.h"

#include <utility>

#include "common/util/serial_executor.h"
#include "spdlog/spdlog.h"

namespace tandem {

KvEventsWatcher::KvEventsWatcher(std::shared_ptr<Node> node, absl::Duration retry_interval)
    : node_(std::move(node)), retry_interval_(retry_interval) {
  thread_ = std::thread([this] { Run(); });
}

KvEventsWatcher::~KvEventsWatcher() { Stop(); }

void KvEventsWatcher::Restart() {
  SerialExecutor::InlineBlock no_inline;  // TryCancel under mu_
  absl::MutexLock lock(&mu_);
  wake_ = true;
  if (active_ != nullptr) active_->TryCancel();
}

void KvEventsWatcher::Wake() {
  absl::MutexLock lock(&mu_);
  wake_ = true;
}

void KvEventsWatcher::Stop() {
  SerialExecutor::InlineBlock no_inline;  // TryCancel under mu_
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
    if (active_ != nullptr) active_->TryCancel();
  }
  if (thread_.joinable()) thread_.join();
}

void KvEventsWatcher::Run() {
  bool warned_unimplemented = false;
  while (true) {
    {
      absl::MutexLock lock(&mu_);
      if (stop_) return;
    }
    if (node_->up()) {
      grpc::ClientContext ctx;
      {
        absl::MutexLock lock(&mu_);
        if (stop_) return;
        active_ = &ctx;
      }
      v1::WatchKvEventsRequest request;
      std::unique_ptr<grpc::ClientReader<v1::KvEvents>> reader =
          node_->role() == NodeRole::kPrefill ? node_->prefill().WatchKvEvents(&ctx, request)
                                              : node_->decode().WatchKvEvents(&ctx, request);
      v1::KvEvents events;
      while (reader->Read(&events)) node_->ApplyKvEvents(events);
      grpc::Status status = reader->Finish();
      {
        absl::MutexLock lock(&mu_);
        active_ = nullptr;
      }
      node_->ClearKvCache();
      if (status.error_code() == grpc::StatusCode::UNIMPLEMENTED) {
        if (!warned_unimplemented) {
          spdlog::warn("{} node {} does not implement WatchKvEvents; placement sees no cache there",
                       NodeRoleName(node_->role()), node_->address());
          warned_unimplemented = true;
        }
      } else if (!status.ok() && status.error_code() != grpc::StatusCode::CANCELLED) {
        spdlog::debug("{} node {}: WatchKvEvents ended: {}", NodeRoleName(node_->role()),
                      node_->address(), status.error_message());
      }
    }
    absl::MutexLock lock(&mu_);
    auto stop_or_wake = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stop_ || wake_; };
    mu_.AwaitWithTimeout(absl::Condition(&stop_or_wake), retry_interval_);
    wake_ = false;
  }
}

}  // namespace tandem
