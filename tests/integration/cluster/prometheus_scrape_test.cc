// A real Prometheus server (Debian's `prometheus`) scrapes the router, the prefill node and the
// decode node of a local cluster while requests run; the test then asks Prometheus' HTTP API
// what it stored and checks it against what the test did: every target up, the router's TTFT
// histogram count equal to the number of completed requests, requests by status, tokens
// generated on the decode node equal to the completion tokens the router sent. `promtool check
// metrics` must be clean on every process's output.
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/integration/cluster/local_cluster_fixture.h"
#include "tests/integration/process_launcher.h"
#include "tests/integration/test_model_dir.h"

namespace tandem::testing {
namespace {

constexpr int kRequests = 12;
constexpr int kScrapeMaxTokens = 6;

std::string FindTool(const std::string& name) {
  for (const char* dir : {"/usr/bin", "/usr/local/bin", "/bin"}) {
    std::string path = absl::StrCat(dir, "/", name);
    if (::access(path.c_str(), X_OK) == 0) return path;
  }
  return "";
}

// A loopback port nothing listens on right now (Prometheus cannot report a port it picked).
int FreePort() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof(addr);
  int port = 0;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
    port = ntohs(addr.sin_port);
  }
  ::close(fd);
  return port;
}

absl::StatusOr<std::string> HttpGet(const std::string& url) {
  CommandResult r =
      RunCommand("/usr/bin/curl", {"-sS", "--fail", "--max-time", "5", url}, {}, absl::Seconds(10));
  if (r.exit_code != 0) {
    return absl::UnavailableError(absl::StrCat("curl ", url, ": ", r.stderr_text));
  }
  return r.stdout_text;
}

// One instant query's single value (NaN-free), or an error naming the query.
absl::StatusOr<double> QueryScalar(const std::string& prometheus, const std::string& query) {
  CommandResult r = RunCommand("/usr/bin/curl",
                               {"-sS", "--fail", "--max-time", "5", "-G",
                                absl::StrCat("http://", prometheus, "/api/v1/query"),
                                "--data-urlencode", absl::StrCat("query=", query)},
                               {}, absl::Seconds(10));
  if (r.exit_code != 0) return absl::UnavailableError(r.stderr_text);
  nlohmann::json j = nlohmann::json::parse(r.stdout_text, nullptr, false);
  if (j.is_discarded() || j.value("status", "") != "success") {
    return absl::InternalError(absl::StrCat(query, ": ", r.stdout_text));
  }
  const auto& result = j["data"]["result"];
  if (!result.is_array() || result.size() != 1) {
    return absl::NotFoundError(absl::StrCat(query, ": ", result.dump()));
  }
  return std::stod(result[0]["value"][1].get<std::string>());
}

// Polls `query` until it equals `want` (Prometheus needs a scrape after the last change).
::testing::AssertionResult EventuallyEquals(const std::string& prometheus, const std::string& query,
                                            double want) {
  absl::StatusOr<double> last = absl::UnknownError("not queried");
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  while (absl::Now() < deadline) {
    last = QueryScalar(prometheus, query);
    if (last.ok() && *last == want) return ::testing::AssertionSuccess();
    absl::SleepFor(absl::Milliseconds(200));
  }
  return ::testing::AssertionFailure()
         << query << " never became " << want
         << "; last: " << (last.ok() ? absl::StrCat(*last) : last.status().ToString());
}

TEST(PrometheusScrapeTest, APrometheusServerSeesWhatTheClusterDid) {
  const std::string prometheus_bin = FindTool("prometheus");
  const std::string promtool = FindTool("promtool");
  ASSERT_FALSE(prometheus_bin.empty() || promtool.empty())
      << "prometheus / promtool not found: run scripts/install-deps.sh (Debian package "
         "`prometheus`)";

  LocalCluster cluster;
  ClusterSpec spec;
  spec.model_dir = TestModelDir("llama");
  ASSERT_NO_FATAL_FAILURE(cluster.Start(spec));
  const std::vector<std::pair<std::string, std::string>> targets = {
      {"router", cluster.router_metrics_address()},
      {"prefill", cluster.prefill_metrics_address(0)},
      {"decode", cluster.decode_metrics_address(0)}};
  for (const auto& [job, address] : targets) ASSERT_FALSE(address.empty()) << job;

  // Prometheus on loopback, scraping every 200 ms.
  const std::string dir = MakeTestTempDir("prometheus");
  const int port = FreePort();
  ASSERT_GT(port, 0);
  const std::string prometheus = absl::StrCat("127.0.0.1:", port);
  {
    std::ofstream config(dir + "/prometheus.yml");
    config << "global:\n  scrape_interval: 200ms\n  scrape_timeout: 150ms\nscrape_configs:\n";
    for (const auto& [job, address] : targets) {
      config << "  - job_name: " << job << "\n    static_configs:\n      - targets: ['" << address
             << "']\n";
    }
  }
  LaunchedProcess::Options options;
  options.add_ready_file_flag = false;
  auto server = LaunchedProcess::Start(
      prometheus_bin,
      {absl::StrCat("--config.file=", dir, "/prometheus.yml"),
       absl::StrCat("--storage.tsdb.path=", dir, "/data"),
       absl::StrCat("--web.listen-address=", prometheus), "--log.level=warn"},
      options);
  ASSERT_TRUE(server.ok()) << server.status();
  bool ready = false;
  for (int i = 0; i < 150 && !ready; ++i) {
    ready = HttpGet(absl::StrCat("http://", prometheus, "/-/ready")).ok();
    if (!ready) absl::SleepFor(absl::Milliseconds(200));
  }
  ASSERT_TRUE(ready) << "Prometheus did not become ready:\n" << (*server)->LogTail();
  for (const auto& [job, address] : targets) {
    EXPECT_TRUE(EventuallyEquals(prometheus, absl::StrCat("up{job=\"", job, "\"}"), 1)) << job;
  }

  // Requests while Prometheus scrapes: distinct prompts, a fixed number of tokens each.
  int64_t completion_tokens = 0;
  for (int i = 0; i < kRequests; ++i) {
    std::vector<int> prompt;
    for (int t = 0; t < 20 + i; ++t) prompt.push_back(100 + (t * 31 + i * 7) % 500);
    GenerateOutcome r = cluster.Generate(GreedyTokenRequest(prompt, kScrapeMaxTokens));
    ASSERT_TRUE(r.status.ok()) << r.status.error_message() << "\n" << cluster.Logs();
    completion_tokens += static_cast<int64_t>(r.tokens.size());
    absl::SleepFor(absl::Milliseconds(50));
  }
  EXPECT_EQ(completion_tokens, kRequests * kScrapeMaxTokens);

  const std::string router_job = "{job=\"router\"}";
  EXPECT_TRUE(EventuallyEquals(
      prometheus, absl::StrCat("tandem_router_time_to_first_token_seconds_count", router_job),
      kRequests));
  EXPECT_TRUE(EventuallyEquals(
      prometheus, "tandem_router_requests_total{job=\"router\",api=\"grpc\",status=\"ok\"}",
      kRequests));
  EXPECT_TRUE(EventuallyEquals(prometheus,
                               absl::StrCat("tandem_router_completion_tokens_total", router_job),
                               static_cast<double>(completion_tokens)));
  EXPECT_TRUE(EventuallyEquals(
      prometheus, absl::StrCat("tandem_router_e2e_request_latency_seconds_count", router_job),
      kRequests));
  // Every request placed once: through a prefill node or, where the cost policy found it cheaper,
  // on the decode node.
  EXPECT_TRUE(EventuallyEquals(prometheus, "sum(tandem_router_placements_total{job=\"router\"})",
                               kRequests));
  EXPECT_TRUE(EventuallyEquals(prometheus, "tandem_router_requests_in_flight", 0));
  // The TTFT histogram's +Inf bucket holds every observation.
  EXPECT_TRUE(EventuallyEquals(
      prometheus, "tandem_router_time_to_first_token_seconds_bucket{job=\"router\",le=\"+Inf\"}",
      kRequests));
  // The decode node's output tokens are what the router sent (the first token of each request,
  // sampled by the prefill node, counts on the decode node once it is imported).
  EXPECT_TRUE(EventuallyEquals(prometheus, "sum(tandem_decode_generated_tokens_total)",
                               static_cast<double>(completion_tokens)));

  // Every process's exposition passes promtool's lint.
  for (const auto& [job, address] : targets) {
    absl::StatusOr<std::string> text = ScrapeMetrics(address);
    ASSERT_TRUE(text.ok()) << job << ": " << text.status();
    const std::string file = absl::StrCat(dir, "/", job, ".prom");
    std::ofstream(file) << *text;
    CommandResult lint =
        RunCommand("/bin/sh", {"-c", absl::StrCat(promtool, " check metrics < ", file)});
    EXPECT_EQ(lint.exit_code, 0) << job << ":\n" << lint.stdout_text << lint.stderr_text;
  }
}

}  // namespace
}  // namespace tandem::testing
