#include "prefill_node/prefill_metrics.h"

#include <iterator>
#include <utility>

#include "absl/strings/match.h"
#include "common/metrics/buckets.h"
#include "prometheus/family.h"

namespace tandem {
namespace {

constexpr const char* kFailureNames[kNumKvTransferFailures] = {
    "deadline",        "peer_unreachable", "layout_mismatch", "bad_handoff",
    "invalid_request", "cancelled",        "other",           "forged_handoff"};

prometheus::Histogram* AddHistogram(prometheus::Registry& registry, const char* name,
                                    const char* help, const std::vector<double>& buckets) {
  return &prometheus::BuildHistogram().Name(name).Help(help).Register(registry).Add({}, buckets);
}

prometheus::Counter* AddCounter(prometheus::Registry& registry, const char* name,
                                const char* help) {
  return &prometheus::BuildCounter().Name(name).Help(help).Register(registry).Add({});
}

double Seconds(absl::Duration d) { return absl::ToDoubleSeconds(d); }

}  // namespace

const char* KvTransferFailureName(KvTransferFailure reason) {
  return kFailureNames[static_cast<int>(reason)];
}

KvTransferFailure ClassifyHandoffError(const absl::Status& status) {
  if (absl::StrContains(status.message(), "layout mismatch")) {
    return KvTransferFailure::kLayoutMismatch;
  }
  return KvTransferFailure::kBadHandoff;
}

KvTransferFailure ClassifyTransferError(const absl::Status& status) {
  switch (status.code()) {
    case absl::StatusCode::kCancelled:
      return KvTransferFailure::kCancelled;
    case absl::StatusCode::kDeadlineExceeded:
      return KvTransferFailure::kDeadline;
    case absl::StatusCode::kUnavailable:
      return KvTransferFailure::kPeerUnreachable;
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kOutOfRange:
    case absl::StatusCode::kFailedPrecondition:
      return ClassifyHandoffError(status);
    default:
      return KvTransferFailure::kOther;
  }
}

PrefillMetrics::PrefillMetrics(bool engine_metrics)
    : engine_metrics_("tandem_prefill"), with_engine_metrics_(engine_metrics) {
  requests_ = AddCounter(registry_, "tandem_prefill_requests_total", "Prefill calls received.");
  auto& failures =
      prometheus::BuildCounter()
          .Name("tandem_prefill_kv_transfer_failures_total")
          .Help(
              "Prefill calls that did not hand their KV to the decode node, by reason: "
              "deadline (the handoff's lease ran out), peer_unreachable (the decode node could "
              "not be reached or the connection failed), layout_mismatch, bad_handoff (a "
              "malformed handoff, or one naming the wrong blocks or transport), "
              "invalid_request (the engine refused the prompt or sampling), cancelled (the "
              "caller cancelled or went away), other, forged_handoff (refused by the handoff "
              "gate: see tandem_prefill_handoffs_refused_total).")
          .Register(registry_);
  for (int i = 0; i < kNumKvTransferFailures; ++i) {
    failures_[i] = &failures.Add({{"reason", kFailureNames[i]}});
  }
  queue_ = AddHistogram(registry_, "tandem_prefill_queue_seconds",
                        "Time a prompt waited on this node before its first chunk was scheduled "
                        "(successful calls).",
                        RequestLatencyBuckets());
  compute_ = AddHistogram(registry_, "tandem_prefill_compute_seconds",
                          "Prefill time: from a prompt's first scheduled chunk until its first "
                          "token was sampled (successful calls).",
                          RequestLatencyBuckets());
  total_ = AddHistogram(registry_, "tandem_prefill_request_duration_seconds",
                        "Time of a successful Prefill call, from its arrival until its answer "
                        "(the KV written and the completion delivered to the decode node).",
                        RequestLatencyBuckets());
  transfer_ = AddHistogram(registry_, "tandem_prefill_kv_transfer_seconds",
                           "KV transfer time of a successful call: from its first write until the "
                           "completion notice was sent (calls that wrote blocks).",
                           StepLatencyBuckets());
  transfer_exposed_ =
      AddHistogram(registry_, "tandem_prefill_kv_transfer_exposed_seconds",
                   "KV transfer time not hidden behind compute: from the first token sampled "
                   "until the completion notice was sent (successful calls).",
                   StepLatencyBuckets());
  bytes_ = AddCounter(registry_, "tandem_prefill_kv_sent_bytes_total",
                      "KV cache bytes written into decode nodes' blocks by successful calls.");
  blocks_written_ = AddCounter(registry_, "tandem_prefill_kv_sent_blocks_total",
                               "KV cache blocks written into decode nodes by successful calls.");
  blocks_skipped_ = AddCounter(registry_, "tandem_prefill_kv_skipped_blocks_total",
                               "Prompt KV blocks not sent because the decode node already held "
                               "them (its prefix cache), in successful calls.");
  writes_ = AddCounter(registry_, "tandem_prefill_kv_writes_total",
                       "Remote KV writes (one per layer, K or V and run of consecutive blocks) "
                       "issued by successful calls.");
}

void PrefillMetrics::SetEngine(const Engine* engine) {
  engine_metrics_.SetEngine(engine);
  absl::MutexLock lock(&mu_);
  engine_ = engine;
}

void PrefillMetrics::SetHandoffGate(const HandoffGate* gate) {
  absl::MutexLock lock(&mu_);
  gate_ = gate;
}

void PrefillMetrics::RequestReceived() { requests_->Increment(); }

void PrefillMetrics::RequestSucceeded(const PrefillSuccess& s) {
  queue_->Observe(Seconds(s.queue));
  compute_->Observe(Seconds(s.compute));
  total_->Observe(Seconds(s.total));
  if (s.transfer.has_value()) transfer_->Observe(Seconds(*s.transfer));
  transfer_exposed_->Observe(Seconds(s.transfer_exposed));
  bytes_->Increment(static_cast<double>(s.bytes));
  blocks_written_->Increment(s.blocks_written);
  blocks_skipped_->Increment(s.blocks_skipped);
  writes_->Increment(s.writes);
}

void PrefillMetrics::RequestFailed(KvTransferFailure reason) {
  failures_[static_cast<int>(reason)]->Increment();
}

std::vector<prometheus::MetricFamily> PrefillMetrics::Collect() const {
  std::vector<prometheus::MetricFamily> out;
  if (with_engine_metrics_) out = engine_metrics_.Collect();
  std::vector<prometheus::MetricFamily> own = registry_.Collect();
  out.insert(out.end(), std::make_move_iterator(own.begin()), std::make_move_iterator(own.end()));
  absl::MutexLock lock(&mu_);
  if (gate_ != nullptr) {
    prometheus::MetricFamily refused;
    refused.name = "tandem_prefill_handoffs_refused_total";
    refused.help =
        "KV handoffs refused before anything was written, by reason: bad_mac (not issued by a "
        "decode node of this cluster, or altered), expired, replayed, extent_changed (a pool "
        "extent other than the one the decode incarnation advertised).";
    refused.type = prometheus::MetricType::Counter;
    for (int i = 0; i < kNumHandoffRefusals; ++i) {
      const auto reason = static_cast<HandoffRefusal>(i);
      prometheus::ClientMetric m;
      m.label.push_back({"reason", HandoffRefusalName(reason)});
      m.counter.value = static_cast<double>(gate_->refused(reason));
      refused.metric.push_back(std::move(m));
    }
    out.push_back(std::move(refused));
  }
  if (engine_ != nullptr) {
    AddGaugeFamily(&out, "tandem_prefill_kv_blocks_export_held",
                   "KV cache blocks of finished prompts kept until their writes to the decode "
                   "node have ended.",
                   engine_->Stats().num_export_held_blocks);
  }
  return out;
}

}  // namespace tandem
