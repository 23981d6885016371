#include "common/serving/engine_metrics.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/metrics/buckets.h"
#include "prometheus/family.h"

namespace tandem {
namespace {

constexpr const char* kPhases[] = {"prefill", "decode", "mixed"};

int PhaseIndex(const EngineStepStats& step) {
  if (step.num_decode_seqs == 0) return 0;
  if (step.num_prefill_seqs == 0) return 1;
  return 2;
}

void AddFamily(std::vector<prometheus::MetricFamily>* out, std::string name, std::string help,
               prometheus::MetricType type, double value) {
  prometheus::MetricFamily family;
  family.name = std::move(name);
  family.help = std::move(help);
  family.type = type;
  prometheus::ClientMetric metric;
  if (type == prometheus::MetricType::Counter) {
    metric.counter.value = value;
  } else {
    metric.gauge.value = value;
  }
  family.metric.push_back(std::move(metric));
  out->push_back(std::move(family));
}

// Speculative decoding (common/engine/speculative.h): verifications, drafts checked and accepted,
// and accepted drafts by position (label `position`: 1 for a step's first draft), positions up to
// the largest one any step reached. Tokens per verification: 1 + accepted / verifications.
void AddSpeculativeFamilies(std::vector<prometheus::MetricFamily>* out, const std::string& p,
                            const EngineStats& s) {
  AddCounterFamily(out, absl::StrCat(p, "_spec_verifications_total"),
                   "Sequence steps that checked speculative draft tokens (one step of the model "
                   "for each sequence, however many drafts it checked).",
                   static_cast<double>(s.num_spec_verifications));
  AddCounterFamily(out, absl::StrCat(p, "_spec_draft_tokens_total"),
                   "Draft tokens checked by the model.",
                   static_cast<double>(s.num_spec_draft_tokens));
  AddCounterFamily(out, absl::StrCat(p, "_spec_accepted_tokens_total"),
                   "Draft tokens the model accepted (emitted without a step of their own).",
                   static_cast<double>(s.num_spec_accepted_tokens));
  prometheus::MetricFamily family;
  family.name = absl::StrCat(p, "_spec_accepted_by_position_total");
  family.help =
      "Accepted draft tokens by their position in a step's drafts (1: the first); position k "
      "over verifications is the acceptance rate at k.";
  family.type = prometheus::MetricType::Counter;
  for (size_t i = 0; i < s.spec_accepted_by_position.size(); ++i) {
    if (i > 0 && s.spec_accepted_by_position[i] == 0) break;
    prometheus::ClientMetric metric;
    metric.label.push_back({"position", absl::StrCat(i + 1)});
    metric.counter.value = static_cast<double>(s.spec_accepted_by_position[i]);
    family.metric.push_back(std::move(metric));
  }
  if (!family.metric.empty()) out->push_back(std::move(family));
}

}  // namespace

const char* StepPhaseName(const EngineStepStats& step) { return kPhases[PhaseIndex(step)]; }

void AddGaugeFamily(std::vector<prometheus::MetricFamily>* out, std::string name, std::string help,
                    double value) {
  AddFamily(out, std::move(name), std::move(help), prometheus::MetricType::Gauge, value);
}

void AddCounterFamily(std::vector<prometheus::MetricFamily>* out, std::string name,
                      std::string help, double value) {
  AddFamily(out, std::move(name), std::move(help), prometheus::MetricType::Counter, value);
}

NodeEngineMetrics::NodeEngineMetrics(std::string prefix) : prefix_(std::move(prefix)) {
  auto& duration =
      prometheus::BuildHistogram()
          .Name(absl::StrCat(prefix_, "_step_duration_seconds"))
          .Help(
              "Time of one engine step (schedule, model forward, sampling, handing tokens out), "
              "by the step's phase: prefill (prompt chunks only), decode (decodes only) or "
              "mixed.")
          .Register(registry_);
  auto& batch_size = prometheus::BuildHistogram()
                         .Name(absl::StrCat(prefix_, "_step_batch_size"))
                         .Help("Sequences in one engine step, by the step's phase.")
                         .Register(registry_);
  auto& tokens = prometheus::BuildHistogram()
                     .Name(absl::StrCat(prefix_, "_step_tokens"))
                     .Help(
                         "Tokens the model computed in one engine step (prompt chunks and "
                         "decodes), by the step's phase.")
                     .Register(registry_);
  for (int i = 0; i < kNumPhases; ++i) {
    const prometheus::Labels labels = {{"phase", kPhases[i]}};
    phases_[i].duration = &duration.Add(labels, StepLatencyBuckets());
    phases_[i].batch_size = &batch_size.Add(labels, CountBuckets());
    phases_[i].tokens = &tokens.Add(labels, CountBuckets());
  }
  step_failures_ = &prometheus::BuildCounter()
                        .Name(absl::StrCat(prefix_, "_step_failures_total"))
                        .Help("Engine steps the model failed (their requests ended with an error).")
                        .Register(registry_)
                        .Add({});
}

void NodeEngineMetrics::ObserveStep(const EngineStepStats& step) {
  const PhaseHistograms& h = phases_[PhaseIndex(step)];
  h.duration->Observe(static_cast<double>(step.duration_nanos) * 1e-9);
  h.batch_size->Observe(step.num_seqs());
  h.tokens->Observe(step.num_tokens());
  if (!step.ok) step_failures_->Increment();
}

void NodeEngineMetrics::SetEngine(const Engine* engine) {
  absl::MutexLock lock(&mu_);
  engine_ = engine;
}

std::vector<prometheus::MetricFamily> NodeEngineMetrics::Collect() const {
  std::vector<prometheus::MetricFamily> out = registry_.Collect();
  EngineStats s;
  {
    absl::MutexLock lock(&mu_);
    if (engine_ == nullptr) return out;
    s = engine_->Stats();
  }
  const std::string& p = prefix_;
  AddGaugeFamily(&out, absl::StrCat(p, "_waiting_sequences"),
                 "Sequences waiting for a seat in the running batch (preempted ones and imported "
                 "requests waiting to start decoding included).",
                 s.num_waiting);
  AddGaugeFamily(&out, absl::StrCat(p, "_running_sequences"), "Sequences in the running batch.",
                 s.num_running);
  AddGaugeFamily(&out, absl::StrCat(p, "_kv_blocks"), "KV cache blocks in this node's pool.",
                 s.num_kv_blocks);
  AddGaugeFamily(&out, absl::StrCat(p, "_kv_blocks_free"),
                 "KV cache blocks no request holds (blocks that only keep prefix-cache content "
                 "count as free).",
                 s.num_free_kv_blocks);
  AddGaugeFamily(&out, absl::StrCat(p, "_kv_blocks_used"),
                 "KV cache blocks held by requests (running, reserved, quarantined or being "
                 "exported).",
                 s.num_kv_blocks - s.num_free_kv_blocks);
  AddGaugeFamily(&out, absl::StrCat(p, "_queued_prompt_tokens"),
                 "Prompt tokens of waiting and running sequences not computed yet.",
                 static_cast<double>(s.num_queued_prompt_tokens));
  AddCounterFamily(&out, absl::StrCat(p, "_steps_total"),
                   "Engine steps that ran the model (failed ones included).",
                   static_cast<double>(s.num_steps));
  AddCounterFamily(&out, absl::StrCat(p, "_computed_tokens_total"),
                   "Tokens the model computed (prompt chunks and decodes).",
                   static_cast<double>(s.num_batched_tokens));
  AddCounterFamily(&out, absl::StrCat(p, "_generated_tokens_total"),
                   "Output tokens produced: sampled on this node, or (decode node) imported with "
                   "a prompt's KV as its first token.",
                   static_cast<double>(s.num_generated_tokens));
  AddCounterFamily(&out, absl::StrCat(p, "_prefix_cache_queried_tokens_total"),
                   "Prompt tokens looked up in the prefix cache when their blocks were allocated.",
                   static_cast<double>(s.prefix_cache_queries));
  AddCounterFamily(&out, absl::StrCat(p, "_prefix_cache_hit_tokens_total"),
                   "Prompt tokens found in the prefix cache (their KV was not computed or moved "
                   "again).",
                   static_cast<double>(s.prefix_cache_hits));
  AddCounterFamily(&out, absl::StrCat(p, "_preemptions_total"),
                   "Sequences preempted (blocks freed, recomputed later) because the KV pool ran "
                   "out.",
                   static_cast<double>(s.num_preemptions));
  AddCounterFamily(&out, absl::StrCat(p, "_finished_requests_total"),
                   "Requests the engine ended, for any reason (aborts and errors included).",
                   static_cast<double>(s.num_finished_requests));
  AddSpeculativeFamilies(&out, p, s);
  return out;
}

}  // namespace tandem
