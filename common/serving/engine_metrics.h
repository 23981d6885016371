// Prometheus metrics of a node's engine, the same on tandem-prefill and tandem-decode under the
// role's prefix (`tandem_prefill`, `tandem_decode`):
//  - per-step histograms (`<prefix>_step_duration_seconds`, `_step_batch_size`, `_step_tokens`,
//    each with a `phase` label: prefill, decode or mixed), fed by EngineOptions::on_step through
//    ObserveStep, so every step is observed exactly once and each histogram's _count summed over
//    phases equals `<prefix>_steps_total`;
//  - the engine's gauges (sequences, KV blocks) and cumulative counters (tokens, prefix cache,
//    preemptions), read from Engine::Stats() at scrape time.
//
//   auto metrics = std::make_shared<NodeEngineMetrics>("tandem_decode");
//   node_options.on_step = [metrics](const EngineStepStats& s) { metrics->ObserveStep(s); };
//   ... create the engine ...
//   metrics->SetEngine(engine);
//   metrics_server->Register(metrics);
#ifndef TANDEM_COMMON_SERVING_ENGINE_METRICS_H_
#define TANDEM_COMMON_SERVING_ENGINE_METRICS_H_

#include <array>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "common/engine/engine.h"
#include "prometheus/collectable.h"
#include "prometheus/counter.h"
#include "prometheus/histogram.h"
#include "prometheus/metric_family.h"
#include "prometheus/registry.h"

namespace tandem {

// "prefill" (prompt chunks only), "decode" (decodes only) or "mixed".
const char* StepPhaseName(const EngineStepStats& step);

// Appends a gauge or counter family with one unlabelled sample (for collectors that read values
// at scrape time).
void AddGaugeFamily(std::vector<prometheus::MetricFamily>* out, std::string name, std::string help,
                    double value);
void AddCounterFamily(std::vector<prometheus::MetricFamily>* out, std::string name,
                      std::string help, double value);

class NodeEngineMetrics : public prometheus::Collectable {
 public:
  // `prefix`: the role's metric prefix, e.g. "tandem_decode".
  explicit NodeEngineMetrics(std::string prefix);

  // Thread-safe and cheap (the engine thread calls it after every step).
  void ObserveStep(const EngineStepStats& step);
  // The engine Collect() reads Stats() from; borrowed, must outlive scrapes (nullptr: none; only
  // the step histograms are served then).
  void SetEngine(const Engine* engine);

  std::vector<prometheus::MetricFamily> Collect() const override;

 private:
  static constexpr int kNumPhases = 3;
  struct PhaseHistograms {
    prometheus::Histogram* duration = nullptr;
    prometheus::Histogram* batch_size = nullptr;
    prometheus::Histogram* tokens = nullptr;
  };

  const std::string prefix_;
  prometheus::Registry registry_;
  std::array<PhaseHistograms, kNumPhases> phases_;
  prometheus::Counter* step_failures_ = nullptr;

  mutable absl::Mutex mu_;
  const Engine* engine_ ABSL_GUARDED_BY(mu_) = nullptr;
};

}  // namespace tandem

#endif  // TANDEM_COMMON_SERVING_ENGINE_METRICS_H_
