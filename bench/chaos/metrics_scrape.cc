#include "bench/chaos/metrics_scrape.h"

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <chrono>

#include "absl/strings/str_cat.h"
#include "common/metrics/prometheus_text.h"

namespace tandem::chaos {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

}  // namespace

absl::StatusOr<std::string> ScrapeMetrics(const std::string& address, absl::Duration timeout) {
  const size_t colon = address.rfind(':');
  if (colon == std::string::npos) {
    return absl::InvalidArgumentError(absl::StrCat("bad metrics address '", address, "'"));
  }
  try {
    asio::io_context io;
    tcp::resolver resolver(io);
    beast::tcp_stream stream(io);
    stream.expires_after(std::chrono::milliseconds(absl::ToInt64Milliseconds(timeout)));
    stream.connect(resolver.resolve(address.substr(0, colon), address.substr(colon + 1)));
    http::request<http::empty_body> request(http::verb::get, "/metrics", 11);
    request.set(http::field::host, address);
    http::write(stream, request);
    beast::flat_buffer buffer;
    http::response<http::string_body> response;
    http::read(stream, buffer, response);
    if (response.result() != http::status::ok) {
      return absl::UnavailableError(
          absl::StrCat("GET http://", address, "/metrics: HTTP ", response.result_int()));
    }
    return response.body();
  } catch (const std::exception& e) {
    return absl::UnavailableError(absl::StrCat("GET http://", address, "/metrics: ", e.what()));
  }
}

absl::StatusOr<RouterCounters> ParseRouterCounters(const std::string& text) {
  absl::StatusOr<PrometheusText> scrape = PrometheusText::Parse(text);
  if (!scrape.ok()) return scrape.status();
  RouterCounters c;
  if (scrape->Has(kMigrationsMetric)) c.migrations = scrape->Sum(kMigrationsMetric);
  c.retries = scrape->Sum("tandem_router_retries_total");
  c.failed_after_first_token = scrape->Sum("tandem_router_failed_after_first_token_total");
  c.node_marked_down = scrape->Sum("tandem_router_node_marked_down_total");
  c.node_restarts = scrape->Sum("tandem_router_node_restarts_total");
  for (const MetricSample& s : scrape->samples()) {
    if (s.name == "tandem_router_kv_moves_total") {
      auto result = s.labels.find("result");
      if (result != s.labels.end()) c.kv_moves[result->second] += s.value;
      continue;
    }
    if (s.name != "tandem_router_requests_total") continue;
    auto api = s.labels.find("api");
    auto status = s.labels.find("status");
    if (api == s.labels.end() || api->second != "grpc" || status == s.labels.end()) continue;
    c.requests_by_status[status->second] += s.value;
  }
  return c;
}

}  // namespace tandem::chaos
