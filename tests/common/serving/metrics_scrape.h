// For metrics tests: a collectable's exposition, parsed back into samples the test can look up
// (a parse failure fails the test).
#ifndef TANDEM_TESTS_COMMON_SERVING_METRICS_SCRAPE_H_
#define TANDEM_TESTS_COMMON_SERVING_METRICS_SCRAPE_H_

#include "common/metrics/prometheus_text.h"
#include "gtest/gtest.h"
#include "prometheus/collectable.h"

namespace tandem::testing {

inline PrometheusText Scrape(const prometheus::Collectable& metrics) {
  auto parsed = PrometheusText::Parse(MetricsText({&metrics}));
  EXPECT_TRUE(parsed.ok()) << parsed.status();
  return parsed.ok() ? *parsed : PrometheusText();
}

}  // namespace tandem::testing

#endif  // TANDEM_TESTS_COMMON_SERVING_METRICS_SCRAPE_H_
