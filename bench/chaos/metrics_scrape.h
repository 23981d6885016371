// GET http://ADDRESS/metrics (Boost.Beast, bounded by a timeout) and the router series tandem-chaos
// reports, parsed with common/metrics' Prometheus text reader.
#ifndef TANDEM_BENCH_CHAOS_METRICS_SCRAPE_H_
#define TANDEM_BENCH_CHAOS_METRICS_SCRAPE_H_

#include <map>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace tandem::chaos {

// The body of GET http://<address>/metrics; Unavailable naming the address on any failure.
absl::StatusOr<std::string> ScrapeMetrics(const std::string& address, absl::Duration timeout);

// The migration counter the router exports (summed over its labels) once migration lands.
inline constexpr char kMigrationsMetric[] = "tandem_router_migrations_total";

struct RouterCounters {
  std::optional<double> migrations;  // nullopt: the router exports no such metric
  // Live KV migrations (tandem_router_kv_moves_total, all triggers) by result: moved, resumed,
  // fell_back.
  std::map<std::string, double> kv_moves;
  double retries = 0;                // tandem_router_retries_total, all reasons
  double failed_after_first_token = 0;
  double node_marked_down = 0;
  double node_restarts = 0;
  std::map<std::string, double> requests_by_status;  // tandem_router_requests_total{api="grpc"}
};

// Reads the counters from a scrape's text (InvalidArgument when it does not parse).
absl::StatusOr<RouterCounters> ParseRouterCounters(const std::string& text);

}  // namespace tandem::chaos

#endif  // TANDEM_BENCH_CHAOS_METRICS_SCRAPE_H_
