// Prometheus metrics of tandem-decode (all named `tandem_decode_*`): the engine's (steps,
// sequences, KV blocks, tokens, preemptions: NodeEngineMetrics), the reservation lifecycle (calls
// received, and how each ended), queue times, and the engine's reservation gauges and counters
// read at scrape time (pending, awaiting KV, quarantined blocks, imports, lease expiries, requests
// paused for live KV migration), and live KV migration's exports and arrivals.
//
// Every Reserve call is counted once in `tandem_decode_reservations_total` when it arrives and
// once in `tandem_decode_reservations_ended_total{outcome}` when the call ends; one that carries
// resumed output (a request moving in with its KV) also in `tandem_decode_migrations_in_total`.
// Every ExportKv call is counted once in `tandem_decode_kv_exports_total{result}` when it ends.
// Every request that got its first token here is counted once by path in
// `tandem_decode_prompt_tokens_total{path}`, `tandem_decode_prefix_cache_hit_requests_total{path}`
// (some of its prompt was in this node's prefix cache) and
// `tandem_decode_prefix_cache_hit_prompt_tokens_total{path}` (how much): a conversation's turn
// that finds its earlier turns here (the router's cost policy sends it here from this node's KV
// events) computes only the rest (generate) or is sent only the rest by the prefill node (reserve).
#ifndef TANDEM_DECODE_NODE_DECODE_METRICS_H_
#define TANDEM_DECODE_NODE_DECODE_METRICS_H_

#include <array>
#include <cstdint>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/engine/engine.h"
#include "common/serving/engine_metrics.h"
#include "prometheus/collectable.h"
#include "prometheus/counter.h"
#include "prometheus/histogram.h"
#include "prometheus/registry.h"

namespace tandem {

// How a Reserve call ended (the `outcome` label).
enum class ReservationOutcome {
  kImported,      // the prompt's KV and first token arrived; the request went on to decode
  kRefused,       // refused before reserving: invalid request, or a lease over the maximum
  kCancelled,     // the caller cancelled or went away before the import
  kLeaseExpired,  // the KV did not arrive before the lease ran out
  kAborted,       // the prefill node reported that it stopped writing
  kFailed,        // anything else (an engine stop, a bad first token)
};
inline constexpr int kNumReservationOutcomes = 6;

// "imported", "refused", "cancelled", "lease_expired", "aborted", "failed".
const char* ReservationOutcomeName(ReservationOutcome outcome);

// Why an authenticated KV completion was not admitted (the `reason` label; kv_import_verifier.h).
enum class ImportRefusal {
  kChecksumMismatch,  // a block's landed bytes do not hash to the writer's checksum
  kMissingChecksums,  // not one checksum per written block
  kStaleEpoch,        // the completion names another epoch of the reservation
  kUnverifiable,      // the landed KV could not be hashed (the pool is shorter than the layout)
};
inline constexpr int kNumImportRefusals = 4;

// "checksum_mismatch", "missing_checksums", "stale_epoch", "unverifiable".
const char* ImportRefusalName(ImportRefusal refusal);

// Which call a request came in by (the `path` label): "reserve" (KV from a prefill node) or
// "generate" (prefilled here).
enum class DecodePath { kReserve, kGenerate };

class DecodeMetrics : public prometheus::Collectable {
 public:
  DecodeMetrics();

  // Wire ObserveStep to EngineOptions::on_step.
  NodeEngineMetrics& engine_metrics() { return engine_metrics_; }
  // The engine whose Stats() scrapes read; borrowed (nullptr: none).
  void SetEngine(const Engine* engine);

  // Thread-safe.
  void ReservationStarted();
  void ReservationEnded(ReservationOutcome outcome);
  void GenerateStarted();
  // A KV completion whose MAC did not verify was dropped.
  void CompletionRefused();
  // An import whose landed KV matched every block checksum; one that was refused, and why.
  void ImportVerified();
  void ImportRefused(ImportRefusal refusal);
  // Live KV migration: a Reserve that carries resumed output arrived; an ExportKv call ended, with
  // the bytes it wrote (KvWriteResult::bytes) when it succeeded.
  void MigrationIn();
  void KvExportSucceeded(int64_t bytes);
  void KvExportFailed();
  // Time a request waited before its prompt (generate) or its reservation (reserve) was
  // scheduled; GenerationEvent::queue_nanos of its first token.
  void ObserveQueueTime(DecodePath path, absl::Duration wait);
  // A request's first token: its prompt's length and the part of it found in the prefix cache
  // (Usage::cached_tokens).
  void PromptServed(DecodePath path, int64_t prompt_tokens, int64_t cached_tokens);

  std::vector<prometheus::MetricFamily> Collect() const override;

 private:
  NodeEngineMetrics engine_metrics_;
  prometheus::Registry registry_;
  prometheus::Counter* reservations_;
  std::array<prometheus::Counter*, kNumReservationOutcomes> ended_;
  prometheus::Counter* generates_;
  prometheus::Counter* completions_refused_;
  prometheus::Counter* imports_verified_;
  std::array<prometheus::Counter*, kNumImportRefusals> imports_refused_;
  std::array<prometheus::Histogram*, 2> queue_;
  std::array<prometheus::Counter*, 2> prompt_tokens_;
  std::array<prometheus::Counter*, 2> hit_requests_;
  std::array<prometheus::Counter*, 2> hit_tokens_;
  prometheus::Counter* migrations_in_;
  prometheus::Counter* exports_ok_;
  prometheus::Counter* exports_failed_;
  prometheus::Counter* export_bytes_;

  mutable absl::Mutex mu_;
  const Engine* engine_ ABSL_GUARDED_BY(mu_) = nullptr;
};

}  // namespace tandem

#endif  // TANDEM_DECODE_NODE_DECODE_METRICS_H_
