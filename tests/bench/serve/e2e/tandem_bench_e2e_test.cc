// tandem-bench as a user runs it: the real binary against tandem-bench-echo-server (quick), and
// against a real 1 prefill + 1 decode cluster on a tiny random-weight Llama over HTTP (a two-rate
// sweep with SLOs, --out JSON and --plot SVG) and gRPC. Every request must succeed with exactly
// the asked-for output length. Fails (does not skip) when a binary is missing from the build.
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/integration/process_launcher.h"
#include "tests/integration/test_model_dir.h"

namespace tandem {
namespace {

using ::testing::HasSubstr;
using json = nlohmann::json;

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

class TandemBenchE2eTest : public ::testing::Test {
 protected:
  void SetUp() override { tmp_dir_ = MakeTestTempDir("tandem_bench_e2e_"); }
  void TearDown() override { std::filesystem::remove_all(tmp_dir_); }

  // Runs tandem-bench with `args` plus --out/--plot in the temp dir; returns the parsed JSON.
  json RunBench(const std::string& name, std::vector<std::string> args, CommandResult* result) {
    const std::string out = tmp_dir_ + "/" + name + ".json";
    const std::string plot = tmp_dir_ + "/" + name + ".svg";
    args.insert(args.end(), {"--out", out, "--plot", plot, "--no-progress"});
    *result = RunCommand(BinaryPath("tandem-bench"), args, {}, absl::Seconds(120));
    EXPECT_EQ(result->exit_code, 0) << result->stdout_text << result->stderr_text;
    EXPECT_TRUE(std::filesystem::exists(plot)) << plot;
    const std::string svg = ReadFile(plot);
    EXPECT_THAT(svg, HasSubstr("<svg"));
    EXPECT_THAT(svg, HasSubstr("</svg>"));
    json doc = json::parse(ReadFile(out), nullptr, /*allow_exceptions=*/false);
    EXPECT_TRUE(doc.is_object()) << "bad JSON in " << out;
    return doc.is_object() ? doc : json::object();
  }

  // Every run of `doc`: all `n` requests completed with `out_len` tokens each.
  static void ExpectAllCompleted(const json& doc, size_t runs, int n, int out_len) {
    ASSERT_TRUE(doc.contains("runs")) << doc.dump();
    ASSERT_EQ(doc["runs"].size(), runs) << doc.dump();
    for (const json& run : doc["runs"]) {
      const json& s = run["summary"];
      EXPECT_EQ(s["completed"], n) << s.dump();
      EXPECT_EQ(s["failed"], 0) << s.dump();
      EXPECT_EQ(s["output_tokens"], static_cast<int64_t>(n) * out_len) << s.dump();
      EXPECT_GT(s["ttft_s"]["mean"].get<double>(), 0.0);
      EXPECT_GT(s["request_throughput"].get<double>(), 0.0);
      ASSERT_EQ(run["requests"].size(), static_cast<size_t>(n));
      for (const json& r : run["requests"]) {
        EXPECT_EQ(r["success"], true) << r.dump();
        EXPECT_EQ(r["output_tokens"], out_len) << r.dump();
      }
    }
  }

  std::string tmp_dir_;
};

// The echo server's address, from the ready file it writes once listening.
absl::StatusOr<std::string> WaitEchoServer(LaunchedProcess& server) {
  const absl::Time give_up = absl::Now() + absl::Seconds(30);
  while (absl::Now() < give_up) {
    if (std::filesystem::exists(server.ready_file())) {
      json doc = json::parse(ReadFile(server.ready_file()), nullptr, false);
      if (doc.is_object() && doc.contains("http")) return doc["http"].get<std::string>();
    }
    if (!server.Running()) break;
    absl::SleepFor(absl::Milliseconds(20));
  }
  return absl::UnavailableError("the echo server did not start: " + server.LogTail());
}

TEST_F(TandemBenchE2eTest, EchoServerSweep) {
  ASSERT_EQ(MissingBinaries({"tandem-bench", "tandem-bench-echo-server"}), "");
  auto server = LaunchedProcess::Start(BinaryPath("tandem-bench-echo-server"), {});
  ASSERT_TRUE(server.ok()) << server.status();
  absl::StatusOr<std::string> address = WaitEchoServer(**server);
  ASSERT_TRUE(address.ok()) << address.status();

  CommandResult result;
  json doc = RunBench(
      "echo",
      {"--base-url", "http://" + *address + "/v1", "--num-prompts", "40", "--random-input-len",
       "16", "--random-output-len", "8", "--request-rates", "200,inf", "--slo-ttft-ms", "1000",
       "--slo-tpot-ms", "100", "--warmup", "4", "--max-concurrency", "16"},
      &result);
  ExpectAllCompleted(doc, 2, 40, 8);
  // The model came from GET /v1/models.
  EXPECT_THAT(result.stdout_text, HasSubstr("Serving Benchmark Result"));
  EXPECT_THAT(result.stdout_text, HasSubstr("Goodput"));
  ASSERT_TRUE(doc.contains("goodput"));
  EXPECT_TRUE(doc["goodput"].contains("rate"));
  EXPECT_EQ(doc["runs"][1]["rate"], "inf");
  EXPECT_EQ(doc["config"]["warmup"], 4);
}

TEST_F(TandemBenchE2eTest, BadFlagsExitTwoAndAnUnreachableServerExitsOne) {
  ASSERT_EQ(MissingBinaries({"tandem-bench"}), "");
  CommandResult help = RunCommand(BinaryPath("tandem-bench"), {"--help"});
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_THAT(help.stdout_text, HasSubstr("--request-rates"));
  CommandResult bad =
      RunCommand(BinaryPath("tandem-bench"), {"--address", "127.0.0.1:1", "--request-rate", "-3"});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_THAT(bad.stderr_text, HasSubstr("--request-rate"));
  // HTTP without --model asks the server, which is not there.
  CommandResult down =
      RunCommand(BinaryPath("tandem-bench"), {"--address", "127.0.0.1:1", "--num-prompts", "2"});
  EXPECT_EQ(down.exit_code, 1);
  EXPECT_THAT(down.stderr_text, HasSubstr("127.0.0.1:1"));
  // With a model name the requests are sent and fail: reported, exit 0 unless --fail-on-error.
  const std::vector<std::string> failing = {"--address",
                                            "127.0.0.1:1",
                                            "--model",
                                            "m",
                                            "--num-prompts",
                                            "2",
                                            "--no-progress",
                                            "--random-input-len",
                                            "4",
                                            "--random-output-len",
                                            "2"};
  CommandResult failed = RunCommand(BinaryPath("tandem-bench"), failing);
  EXPECT_EQ(failed.exit_code, 0) << failed.stderr_text;
  EXPECT_THAT(failed.stderr_text, HasSubstr("2 request(s) failed"));
  std::vector<std::string> strict = failing;
  strict.push_back("--fail-on-error");
  EXPECT_EQ(RunCommand(BinaryPath("tandem-bench"), strict).exit_code, 1);
}

TEST_F(TandemBenchE2eTest, LocalClusterOverHttpAndGrpc) {
  ASSERT_EQ(MissingBinaries({"tandem-bench", "tandem-cluster", "tandem-router", "tandem-prefill",
                             "tandem-decode"}),
            "");
  const std::string model = TestModelDir("llama");
  const std::string log_dir = tmp_dir_ + "/logs";
  LaunchedProcess::Options launch;
  launch.env = {{"TMPDIR", tmp_dir_}};
  auto cluster = LaunchedProcess::Start(
      BinaryPath("tandem-cluster"),
      {"--model", model, "--prefill", "1", "--decode", "1", "--threads-per-node", "1", "--log-dir",
       log_dir, "--startup-timeout-s", "120"},
      launch);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  absl::StatusOr<std::string> grpc = (*cluster)->WaitReady(absl::Seconds(150));
  ASSERT_TRUE(grpc.ok()) << grpc.status();
  json endpoints = json::parse((*cluster)->ReadyFileText());
  ASSERT_TRUE(endpoints.contains("http")) << endpoints.dump();
  const std::string http = endpoints["http"].get<std::string>();

  CommandResult result;
  json doc = RunBench("cluster_http",
                      {"--address", http, "--num-prompts", "12", "--random-input-len", "16",
                       "--random-output-len", "8", "--request-rates", "8,inf", "--slo-ttft-ms",
                       "10000", "--slo-tpot-ms", "5000", "--seed", "3"},
                      &result);
  ExpectAllCompleted(doc, 2, 12, 8);
  if (doc.contains("runs") && doc["runs"].size() == 2) {
    // The server counted the prompts: 16 ids each.
    EXPECT_EQ(doc["runs"][0]["summary"]["input_tokens"], 12 * 16);
    EXPECT_EQ(doc["runs"][0]["rate"], 8.0);
    // Generous limits: every request met them, so the goodput is the highest rate.
    EXPECT_DOUBLE_EQ(doc["runs"][0]["summary"]["slo_attainment"].get<double>(), 1.0);
    EXPECT_EQ(doc["goodput"]["rate"], "inf");
  }
  EXPECT_THAT(result.stdout_text, HasSubstr("Rate sweep"));

  CommandResult grpc_result;
  json grpc_doc =
      RunBench("cluster_grpc",
               {"--api", "grpc", "--address", *grpc, "--num-prompts", "6", "--random-input-len",
                "16", "--random-output-len", "8", "--max-concurrency", "3"},
               &grpc_result);
  ExpectAllCompleted(grpc_doc, 1, 6, 8);

  if (HasFailure()) {
    std::error_code ec;
    for (const auto& entry : std::filesystem::directory_iterator(log_dir, ec)) {
      std::fprintf(stderr, "--- %s ---\n%s\n", entry.path().c_str(),
                   ReadFileTail(entry.path().string(), 30).c_str());
    }
  }
}

}  // namespace
}  // namespace tandem
