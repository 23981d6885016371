// Prometheus metrics of tandem-prefill (all named `tandem_prefill_*`): the engine's (steps,
// sequences, KV blocks, prefix cache: NodeEngineMetrics), plus per Prefill call its times, the KV
// it moved into decode nodes and, for calls that did not hand their KV over, why.
//
// Every Prefill call is counted once in `tandem_prefill_requests_total` when it arrives and once
// more when it ends: in the request-duration histogram (success) or in
// `tandem_prefill_kv_transfer_failures_total{reason}`.
#ifndef TANDEM_PREFILL_NODE_PREFILL_METRICS_H_
#define TANDEM_PREFILL_NODE_PREFILL_METRICS_H_

#include <array>
#include <cstdint>
#include <optional>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/engine/engine.h"
#include "common/serving/engine_metrics.h"
#include "common/transport/handoff_gate.h"
#include "prometheus/collectable.h"
#include "prometheus/counter.h"
#include "prometheus/histogram.h"
#include "prometheus/registry.h"

namespace tandem {

// Why a Prefill call did not hand its KV to the decode node (the `reason` label).
enum class KvTransferFailure {
  kDeadline,         // the handoff's deadline (the decode node's lease) passed
  kPeerUnreachable,  // the decode node could not be reached, or the connection failed
  kLayoutMismatch,   // the decode node's KV layout does not match this node's
  kBadHandoff,       // the handoff is malformed or names the wrong blocks / transport
  kInvalidRequest,   // the engine refused the prompt or sampling parameters
  kCancelled,        // the caller cancelled or went away
  kOther,            // anything else (an engine error or stop, an internal error)
  kForgedHandoff,    // the handoff failed the gate: bad MAC, expired, replayed, extent changed
};
inline constexpr int kNumKvTransferFailures = 8;

// "deadline", "peer_unreachable", "layout_mismatch", "bad_handoff", "invalid_request",
// "cancelled", "other", "forged_handoff".
const char* KvTransferFailureName(KvTransferFailure reason);

// The reason for a handoff refused before anything was written (parsing it, checking the layout).
KvTransferFailure ClassifyHandoffError(const absl::Status& status);
// The reason for a transfer that failed after the engine took the request, from the writer's
// status (KvBlockWriter, the transport).
KvTransferFailure ClassifyTransferError(const absl::Status& status);

// One Prefill call that handed its KV over.
struct PrefillSuccess {
  absl::Duration queue;    // arrival until its first chunk was scheduled
  absl::Duration compute;  // first chunk scheduled until the first token was sampled
  absl::Duration total;    // the call, from arrival to its answer
  // First write issued until the completion notice was sent; unset when nothing was written
  // (the decode node held the whole prompt).
  std::optional<absl::Duration> transfer;
  absl::Duration transfer_exposed;  // transfer time after the first token was sampled
  int64_t bytes = 0;
  int32_t blocks_written = 0;
  int32_t blocks_skipped = 0;  // the decode node had them (its prefix cache)
  int32_t writes = 0;          // RMA writes after coalescing
};

class PrefillMetrics : public prometheus::Collectable {
 public:
  // `engine_metrics` false: Collect() leaves out the engine's (NodeEngineMetrics) families, for a
  // decode node that also prefills (--serve-prefill), whose tandem_decode_* ones already count
  // its one engine.
  explicit PrefillMetrics(bool engine_metrics = true);

  // Wire ObserveStep to EngineOptions::on_step.
  NodeEngineMetrics& engine_metrics() { return engine_metrics_; }
  // The engine whose Stats() scrapes read; borrowed (nullptr: none).
  void SetEngine(const Engine* engine);
  // The gate whose refusals /metrics reports (tandem_prefill_handoffs_refused_total); borrowed.
  void SetHandoffGate(const HandoffGate* gate);

  // Thread-safe.
  void RequestReceived();
  void RequestSucceeded(const PrefillSuccess& success);
  void RequestFailed(KvTransferFailure reason);

  std::vector<prometheus::MetricFamily> Collect() const override;

 private:
  NodeEngineMetrics engine_metrics_;
  const bool with_engine_metrics_;
  prometheus::Registry registry_;
  prometheus::Counter* requests_;
  std::array<prometheus::Counter*, kNumKvTransferFailures> failures_;
  prometheus::Histogram* queue_;
  prometheus::Histogram* compute_;
  prometheus::Histogram* total_;
  prometheus::Histogram* transfer_;
  prometheus::Histogram* transfer_exposed_;
  prometheus::Counter* bytes_;
  prometheus::Counter* blocks_written_;
  prometheus::Counter* blocks_skipped_;
  prometheus::Counter* writes_;

  mutable absl::Mutex mu_;
  const Engine* engine_ ABSL_GUARDED_BY(mu_) = nullptr;
  const HandoffGate* gate_ ABSL_GUARDED_BY(mu_) = nullptr;
};

}  // namespace tandem

#endif  // TANDEM_PREFILL_NODE_PREFILL_METRICS_H_
