// Reads Prometheus' text exposition format (what /metrics serves) back into samples, for tests and
// tools that check what a process exports; and renders collectables as that text.
//
//   ASSIGN_OR_RETURN(PrometheusText scrape, PrometheusText::Parse(body));
//   double tokens = scrape.Value("tandem_decode_generated_tokens_total").value_or(0);
//   double steps = scrape.Sum("tandem_decode_step_duration_seconds_count");  // over all labels
#ifndef TANDEM_COMMON_METRICS_PROMETHEUS_TEXT_H_
#define TANDEM_COMMON_METRICS_PROMETHEUS_TEXT_H_

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "prometheus/collectable.h"

namespace tandem {

using MetricLabels = std::map<std::string, std::string>;

struct MetricSample {
  std::string name;  // as written: histograms' samples end in _bucket, _sum, _count
  MetricLabels labels;
  double value = 0;
};

class PrometheusText {
 public:
  // InvalidArgument naming the line for a sample line that does not parse.
  static absl::StatusOr<PrometheusText> Parse(std::string_view text);

  // The sample named `name` whose labels are exactly `labels`; nullopt when there is none.
  std::optional<double> Value(std::string_view name, const MetricLabels& labels = {}) const;
  // The sum over samples named `name` whose labels include `labels` (0 when none match).
  double Sum(std::string_view name, const MetricLabels& labels = {}) const;
  // Whether any sample is named `name`.
  bool Has(std::string_view name) const;
  // A family's # TYPE and # HELP text ("" when absent).
  std::string Type(std::string_view family) const;
  std::string Help(std::string_view family) const;

  const std::vector<MetricSample>& samples() const { return samples_; }

 private:
  std::vector<MetricSample> samples_;
  std::map<std::string, std::string, std::less<>> types_;
  std::map<std::string, std::string, std::less<>> helps_;
};

// What a scrape of `collectables` would return, in the text format.
std::string MetricsText(const std::vector<const prometheus::Collectable*>& collectables);

}  // namespace tandem

#endif  // TANDEM_COMMON_METRICS_PROMETHEUS_TEXT_H_
