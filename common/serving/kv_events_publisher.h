// WatchKvEvents, as both node services serve it (tandem.v1.PrefillNode and DecodeNode): the
// content of an engine's prefix cache, streamed to a router as tandem.v1.KvEvents. A prefill
// node's lets the router send a prompt where its prefix is cached (prefix_aware, cost); a decode
// node's lets it send a conversation's next turn to the decode node holding the turns before it
// (cost: a local prefill there computes only the new part, a disaggregated one sends only the
// blocks the decode node lacks).
//
// One stream: a first message with `reset` and the whole cache, then, every `interval`, a delta
// (`stored`, `removed`) whenever the cache's content changed. The engine's view is
// Engine::CachedBlockHashes (as of its last step); a stream looks at it only when the engine's
// kv_cache_version moved. Every message carries the node's incarnation and the block size the
// hashes are over (common/kv/block_hash.h).
//
// A stream holds one thread of gRPC's sync pool for its whole life (common/serving/grpc_server.h).
// It ends when its client goes away, a write fails, or Stop(): a node that drains stops its
// streams (UNAVAILABLE) so that they do not hold its shutdown until the drain deadline, and
// refuses new ones. Thread-safe.
#ifndef TANDEM_COMMON_SERVING_KV_EVENTS_PUBLISHER_H_
#define TANDEM_COMMON_SERVING_KV_EVENTS_PUBLISHER_H_

#include <cstdint>
#include <span>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/engine/engine.h"
#include "grpcpp/grpcpp.h"
#include "grpcpp/support/sync_stream.h"
#include "tandem/v1/node.pb.h"

namespace tandem {

class KvEventsPublisher {
 public:
  // `engine` is borrowed and must outlive every stream; `incarnation` is the node's (its KV
  // transport's), `interval` how often a stream looks for changes.
  KvEventsPublisher(const Engine* engine, uint64_t incarnation, absl::Duration interval);
  KvEventsPublisher(const KvEventsPublisher&) = delete;
  KvEventsPublisher& operator=(const KvEventsPublisher&) = delete;

  // Serves one WatchKvEvents stream until its client goes away or a write fails (OK), or Stop()
  // (UNAVAILABLE). Blocks the calling (sync pool) thread.
  grpc::Status Serve(grpc::ServerContext* context, grpc::ServerWriter<v1::KvEvents>* writer);

  // Ends every stream within one interval and refuses new ones (UNAVAILABLE). Idempotent.
  void Stop();

  // The message that takes a view holding `known` to `now` (both sorted): with `reset`, `now`
  // whole; else what `now` has and `known` lacks (`stored`) and the reverse (`removed`). Pure.
  static v1::KvEvents Delta(std::span<const uint64_t> known, std::span<const uint64_t> now,
                            bool reset, uint64_t incarnation, int32_t block_size);

 private:
  // Waits `interval_` or until Stop(); true once stopped.
  bool WaitOrStopped();

  const Engine* const engine_;
  const uint64_t incarnation_;
  const absl::Duration interval_;
  absl::Mutex mu_;
  bool stopped_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace tandem

#endif  // TANDEM_COMMON_SERVING_KV_EVENTS_PUBLISHER_H_
