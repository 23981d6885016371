#include "common/serving/kv_events_publisher.h"

#include <algorithm>
#include <iterator>
#include <utility>
#include <vector>

namespace tandem {

KvEventsPublisher::KvEventsPublisher(const Engine* engine, uint64_t incarnation,
                                     absl::Duration interval)
    : engine_(engine), incarnation_(incarnation), interval_(interval) {}

v1::KvEvents KvEventsPublisher::Delta(std::span<const uint64_t> known,
                                      std::span<const uint64_t> now, bool reset,
                                      uint64_t incarnation, int32_t block_size) {
  v1::KvEvents events;
  events.set_incarnation(incarnation);
  events.set_block_size(block_size);
  events.set_reset(reset);
  if (reset) {
    events.mutable_stored()->Assign(now.begin(), now.end());
    return events;
  }
  std::vector<uint64_t> stored;
  std::vector<uint64_t> removed;
  std::set_difference(now.begin(), now.end(), known.begin(), known.end(),
                      std::back_inserter(stored));
  std::set_difference(known.begin(), known.end(), now.begin(), now.end(),
                      std::back_inserter(removed));
  events.mutable_stored()->Assign(stored.begin(), stored.end());
  events.mutable_removed()->Assign(removed.begin(), removed.end());
  return events;
}

grpc::Status KvEventsPublisher::Serve(grpc::ServerContext* context,
                                      grpc::ServerWriter<v1::KvEvents>* writer) {
  const grpc::Status stopped(grpc::StatusCode::UNAVAILABLE,
                             "this node is draining: it publishes no KV events");
  {
    absl::MutexLock lock(&mu_);
    if (stopped_) return stopped;
  }
  const int32_t block_size = engine_->kv_layout().block_size;
  std::vector<uint64_t> known;
  uint64_t known_version = 0;
  bool first = true;
  while (!context->IsCancelled()) {
    // The version first: hashes newer than it are looked at again next time, never missed.
    const uint64_t version = engine_->Stats().kv_cache_version;
    if (first || version != known_version) {
      std::vector<uint64_t> now = engine_->CachedBlockHashes();
      if (first || now != known) {
        if (!writer->Write(Delta(known, now, first, incarnation_, block_size))) break;
        known = std::move(now);
        first = false;
      }
      known_version = version;
    }
    if (WaitOrStopped()) return stopped;
  }
  return grpc::Status::OK;
}

void KvEventsPublisher::Stop() {
  absl::MutexLock lock(&mu_);
  stopped_ = true;
}

bool KvEventsPublisher::WaitOrStopped() {
  absl::MutexLock lock(&mu_);
  mu_.AwaitWithTimeout(absl::Condition(&stopped_), interval_);
  return stopped_;
}

}  // namespace tandem
