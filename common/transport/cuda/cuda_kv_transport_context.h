// What the parts of CudaKvTransport (peers, direct writes, staged sends, the owner) share: the
// options, the inner transport, the copier, the transport's ids, its loop, the registered device
// pool with its pinned host region, and what other threads read (PublishedState). Owned by
// CudaKvTransport::Impl; each part holds a reference. Everything but `loop` (Post: any thread)
// and `published` (its own mutex) is touched on the transport's thread only, or by Shutdown once
// the thread has ended.
#ifndef TANDEM_COMMON_TRANSPORT_CUDA_CUDA_KV_TRANSPORT_CONTEXT_H_
#define TANDEM_COMMON_TRANSPORT_CUDA_CUDA_KV_TRANSPORT_CONTEXT_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/transport/cuda/cuda_kv_transport.h"
#include "common/transport/cuda/cuda_kv_transport_handles.h"
#include "common/transport/cuda/cuda_kv_transport_loop.h"
#include "common/transport/cuda/memory_copier.h"
#include "common/transport/cuda/staged_messages.h"
#include "common/transport/kv_transport.h"

namespace tandem::cuda_internal {

// A short printable tag of an inner transport address, for messages.
std::string PeerTag(const std::string& address);

// Polls `fences` (elements with `fence` and `queue_error`) in order without blocking; removes each
// that passed or failed and calls on_end(element, status): the poll's error, else the error
// queuing its copies. on_end may append elements; they are polled in the same call.
template <typename Fence, typename OnEnd>
void EndPassedFences(MemoryCopier& copier, std::vector<Fence>& fences, OnEnd on_end) {
  for (size_t i = 0; i < fences.size();) {
    absl::StatusOr<bool> passed = copier.Poll(fences[i].fence);
    if (passed.ok() && !*passed) {
      ++i;
      continue;
    }
    Fence f = std::move(fences[i]);
    fences.erase(fences.begin() + static_cast<ptrdiff_t>(i));
    absl::Status s = passed.status();
    if (s.ok()) s = f.queue_error;
    on_end(f, s);
  }
}

// What callers on any thread read: the pool's descriptor and base, the notice handler and the
// counters, under one mutex.
class PublishedState {
 public:
  void Publish(std::string descriptor, uint64_t pool_base);
  std::string descriptor() const;
  uint64_t pool_base() const;
  void SetNoticeHandler(NoticeHandler handler);
  // The handler a notice arriving now goes to (empty: none), counting the notice delivered.
  NoticeHandler HandlerForNotice();
  void Count(const std::function<void(CudaKvTransportStats&)>& fn);
  CudaKvTransportStats stats() const;

 private:
  mutable absl::Mutex mu_;
  std::string descriptor_ ABSL_GUARDED_BY(mu_);
  uint64_t pool_base_ ABSL_GUARDED_BY(mu_) = 0;
  NoticeHandler handler_ ABSL_GUARDED_BY(mu_);
  CudaKvTransportStats stats_ ABSL_GUARDED_BY(mu_);
};

struct TransportContext {
  TransportContext(std::unique_ptr<KvTransport> inner_transport,
                   std::unique_ptr<MemoryCopier> memory_copier, CudaKvTransportOptions opts);

  absl::Time Now() const { return options.clock->Now(); }

  // Stamps `m` with this transport's writer id and inner address (where replies go) and sends it
  // to `to` as an inner notice; `sent` gets the inner transport's outcome.
  void SendMessage(const KvTarget& to, StagedMessage m, absl::Time deadline, TransferDone sent);

  // The pinned host region: `staging_buffers` staging buffers, then `landing_slots` landing
  // slots, each chunk_bytes long.
  char* staging_buffer(int buffer) const {
    return host.get() + static_cast<size_t>(buffer) * options.chunk_bytes;
  }
  const char* landing_slot(uint32_t slot) const {
    return host.get() + staging_bytes + static_cast<size_t>(slot) * options.chunk_bytes;
  }

  const CudaKvTransportOptions options;
  std::unique_ptr<KvTransport> inner;  // reset by Shutdown (its callbacks then run inline)
  std::unique_ptr<MemoryCopier> copier;
  const uint64_t writer_id;    // random, names this transport in every message it sends
  const std::string host_id;   // HostIdentity()
  std::string inner_address;   // set by Start, read-only after
  uint64_t inner_incarnation;  // likewise
  TaskLoop loop;
  PublishedState published;

  // Set once by RegisterDevicePool.
  char* pool = nullptr;
  size_t pool_bytes = 0;
  HostBuffer host;           // staging buffers, then landing slots; freed by Shutdown
  size_t staging_bytes = 0;  // where the landing slots start in `host`
};

}  // namespace tandem::cuda_internal

#endif  // TANDEM_COMMON_TRANSPORT_CUDA_CUDA_KV_TRANSPORT_CONTEXT_H_
