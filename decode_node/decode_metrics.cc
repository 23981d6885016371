#include "decode_node/decode_metrics.h"

#include <iterator>
#include <utility>

#include "common/metrics/buckets.h"
#include "prometheus/family.h"

namespace tandem {
namespace {

constexpr const char* kOutcomeNames[kNumReservationOutcomes] = {
    "imported", "refused", "cancelled", "lease_expired", "aborted", "failed"};
constexpr const char* kPathNames[] = {"reserve", "generate"};
constexpr const char* kRefusalNames[kNumImportRefusals] = {"checksum_mismatch", "missing_checksums",
                                                           "stale_epoch", "unverifiable"};

}  // namespace

const char* ImportRefusalName(ImportRefusal refusal) {
  return kRefusalNames[static_cast<int>(refusal)];
}

const char* ReservationOutcomeName(ReservationOutcome outcome) {
  return kOutcomeNames[static_cast<int>(outcome)];
}

DecodeMetrics::DecodeMetrics() : engine_metrics_("tandem_decode") {
  reservations_ = &prometheus::BuildCounter()
                       .Name("tandem_decode_reservations_total")
                       .Help("Reserve calls received (prompts whose KV a prefill node computes).")
                       .Register(registry_)
                       .Add({});
  auto& ended =
      prometheus::BuildCounter()
          .Name("tandem_decode_reservations_ended_total")
          .Help(
              "Reserve calls ended, by outcome: imported (the prompt's KV and first token "
              "arrived and the request decoded), refused (an invalid request or lease), "
              "cancelled (the caller cancelled or went away before the import), lease_expired "
              "(the KV did not arrive in time), aborted (the prefill node reported that it "
              "stopped writing), failed (any other error).")
          .Register(registry_);
  for (int i = 0; i < kNumReservationOutcomes; ++i) {
    ended_[i] = &ended.Add({{"outcome", kOutcomeNames[i]}});
  }
  generates_ = &prometheus::BuildCounter()
                    .Name("tandem_decode_generate_requests_total")
                    .Help("Generate calls received (prompts prefilled on this node).")
                    .Register(registry_)
                    .Add({});
  completions_refused_ =
      &prometheus::BuildCounter()
           .Name("tandem_decode_kv_completions_refused_total")
           .Help(
               "KV completion notices dropped because their MAC did not verify (not sent by a "
               "prefill node of this cluster, or altered).")
           .Register(registry_)
           .Add({});
  imports_verified_ =
      &prometheus::BuildCounter()
           .Name("tandem_decode_kv_imports_verified_total")
           .Help("Imports whose landed KV matched the writer's checksum of every block.")
           .Register(registry_)
           .Add({});
  auto& refused =
      prometheus::BuildCounter()
          .Name("tandem_decode_kv_imports_refused_total")
          .Help(
              "Authenticated KV completions whose import was refused (the request failed with "
              "DATA_LOSS and is retried), by reason: checksum_mismatch (a block's landed bytes "
              "differ from what the prefill node wrote), missing_checksums, stale_epoch (the "
              "completion is for another epoch of the reservation), unverifiable (the landed "
              "KV could not be hashed).")
          .Register(registry_);
  for (int i = 0; i < kNumImportRefusals; ++i) {
    imports_refused_[i] = &refused.Add({{"reason", kRefusalNames[i]}});
  }
  auto& queue =
      prometheus::BuildHistogram()
          .Name("tandem_decode_queue_seconds")
          .Help(
              "Time a request waited on this node before it was scheduled, by path: reserve "
              "(until its blocks were reserved) or generate (until its prompt's first chunk "
              "ran).")
          .Register(registry_);
  for (int i = 0; i < 2; ++i) {
    queue_[i] = &queue.Add({{"path", kPathNames[i]}}, RequestLatencyBuckets());
  }
  auto& prompt_tokens =
      prometheus::BuildCounter()
          .Name("tandem_decode_prompt_tokens_total")
          .Help(
              "Prompt tokens of the requests that got their first token here, by path: reserve "
              "(KV from a prefill node) or generate (prefilled here).")
          .Register(registry_);
  auto& hit_requests =
      prometheus::BuildCounter()
          .Name("tandem_decode_prefix_cache_hit_requests_total")
          .Help(
              "Requests that got their first token here and found part of their prompt in this "
              "node's prefix cache (e.g. a conversation's earlier turns), by path.")
          .Register(registry_);
  auto& hit_tokens =
      prometheus::BuildCounter()
          .Name("tandem_decode_prefix_cache_hit_prompt_tokens_total")
          .Help(
              "Prompt tokens of those requests found in this node's prefix cache, by path: not "
              "computed here (generate), not sent by the prefill node (reserve).")
          .Register(registry_);
  for (int i = 0; i < 2; ++i) {
    prompt_tokens_[i] = &prompt_tokens.Add({{"path", kPathNames[i]}});
    hit_requests_[i] = &hit_requests.Add({{"path", kPathNames[i]}});
    hit_tokens_[i] = &hit_tokens.Add({{"path", kPathNames[i]}});
  }
  migrations_in_ = &prometheus::BuildCounter()
                        .Name("tandem_decode_migrations_in_total")
                        .Help(
                            "Reserve calls carrying resumed output: running requests moving in "
                            "from another decode node with their KV (live KV migration).")
                        .Register(registry_)
                        .Add({});
  auto& exports =
      prometheus::BuildCounter()
          .Name("tandem_decode_kv_exports_total")
          .Help(
              "ExportKv calls ended (a paused request's KV written to another decode node), by "
              "result: ok (the KV and the completion were delivered) or failed (refused, or the "
              "transfer failed; the request stays paused here).")
          .Register(registry_);
  exports_ok_ = &exports.Add({{"result", "ok"}});
  exports_failed_ = &exports.Add({{"result", "failed"}});
  export_bytes_ = &prometheus::BuildCounter()
                       .Name("tandem_decode_kv_export_bytes_total")
                       .Help("KV bytes written to other decode nodes by successful ExportKv calls.")
                       .Register(registry_)
                       .Add({});
}

void DecodeMetrics::SetEngine(const Engine* engine) {
  engine_metrics_.SetEngine(engine);
  absl::MutexLock lock(&mu_);
  engine_ = engine;
}

void DecodeMetrics::ReservationStarted() { reservations_->Increment(); }

void DecodeMetrics::ReservationEnded(ReservationOutcome outcome) {
  ended_[static_cast<int>(outcome)]->Increment();
}

void DecodeMetrics::GenerateStarted() { generates_->Increment(); }

void DecodeMetrics::CompletionRefused() { completions_refused_->Increment(); }

void DecodeMetrics::ImportVerified() { imports_verified_->Increment(); }

void DecodeMetrics::ImportRefused(ImportRefusal refusal) {
  imports_refused_[static_cast<int>(refusal)]->Increment();
}

void DecodeMetrics::MigrationIn() { migrations_in_->Increment(); }

void DecodeMetrics::KvExportSucceeded(int64_t bytes) {
  exports_ok_->Increment();
  export_bytes_->Increment(static_cast<double>(bytes));
}

void DecodeMetrics::KvExportFailed() { exports_failed_->Increment(); }

void DecodeMetrics::ObserveQueueTime(DecodePath path, absl::Duration wait) {
  queue_[static_cast<int>(path)]->Observe(absl::ToDoubleSeconds(wait));
}

void DecodeMetrics::PromptServed(DecodePath path, int64_t prompt_tokens, int64_t cached_tokens) {
  const int i = static_cast<int>(path);
  prompt_tokens_[i]->Increment(static_cast<double>(prompt_tokens));
  if (cached_tokens <= 0) return;
  hit_requests_[i]->Increment();
  hit_tokens_[i]->Increment(static_cast<double>(cached_tokens));
}

std::vector<prometheus::MetricFamily> DecodeMetrics::Collect() const {
  std::vector<prometheus::MetricFamily> out = engine_metrics_.Collect();
  std::vector<prometheus::MetricFamily> own = registry_.Collect();
  out.insert(out.end(), std::make_move_iterator(own.begin()), std::make_move_iterator(own.end()));
  EngineStats s;
  {
    absl::MutexLock lock(&mu_);
    if (engine_ == nullptr) return out;
    s = engine_->Stats();
  }
  AddGaugeFamily(&out, "tandem_decode_pending_reservations",
                 "Reservations waiting for free KV blocks.", s.num_pending_reservations);
  AddGaugeFamily(&out, "tandem_decode_reservations_awaiting_kv",
                 "Reservations holding KV blocks while a prefill node writes the prompt's KV.",
                 s.num_awaiting_kv);
  AddGaugeFamily(&out, "tandem_decode_kv_blocks_quarantined",
                 "KV blocks of reservations that ended without their KV, kept out of use while "
                 "late writes may still land.",
                 s.num_quarantined_blocks);
  AddCounterFamily(&out, "tandem_decode_imported_requests_total",
                   "Requests whose prompt KV and first token arrived from a prefill node.",
                   static_cast<double>(s.num_imported_requests));
  AddCounterFamily(&out, "tandem_decode_lease_expiries_total",
                   "Reservations whose lease ran out before their KV arrived (the request failed "
                   "and its blocks were quarantined).",
                   static_cast<double>(s.num_expired_leases));
  AddGaugeFamily(&out, "tandem_decode_paused_requests",
                 "Requests paused for live KV migration, holding their KV blocks until they move "
                 "to another decode node or resume here.",
                 s.num_paused);
  return out;
}

}  // namespace tandem
