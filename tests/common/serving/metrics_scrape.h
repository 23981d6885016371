// For metrics tests: a collectable's exposition, parsed back into samples the test can look up
// (a parse failure fails the test); and the same once a condition on it holds (a call's status can
// reach its client before the server counted its outcome).
#ifndef TANDEM_TESTS_COMMON_SERVING_METRICS_SCRAPE_H_
#define TANDEM_TESTS_COMMON_SERVING_METRICS_SCRAPE_H_

#include "absl/functional/function_ref.h"
#include "absl/time/clock.h"
#include "common/metrics/prometheus_text.h"
#include "gtest/gtest.h"
#include "prometheus/collectable.h"

namespace tandem::testing {

inline PrometheusText Scrape(const prometheus::Collectable& metrics) {
  auto parsed = PrometheusText::Parse(MetricsText({&metrics}));
  EXPECT_TRUE(parsed.ok()) << parsed.status();
  return parsed.ok() ? *parsed : PrometheusText();
}

// Scrapes every 20 ms until `done` holds (up to 4 s); returns the last scrape.
inline PrometheusText ScrapeUntil(const prometheus::Collectable& metrics,
                                  absl::FunctionRef<bool(const PrometheusText&)> done) {
  PrometheusText scrape;
  for (int i = 0; i < 200; ++i) {
    scrape = Scrape(metrics);
    if (done(scrape)) break;
    absl::SleepFor(absl::Milliseconds(20));
  }
  return scrape;
}

}  // namespace tandem::testing

#endif  // TANDEM_TESTS_COMMON_SERVING_METRICS_SCRAPE_H_
