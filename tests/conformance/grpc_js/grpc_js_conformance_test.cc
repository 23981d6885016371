// The independent-client conformance test: a 1 prefill + 1 decode tandem-cluster (and a
// colocated one) on a tiny random-weight Llama, called by generate_stream.mjs through
// @grpc/grpc-js. Fails (never skips) when node, the npm packages or a server binary is missing.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/integration/process_launcher.h"
#include "tests/integration/test_model_dir.h"

namespace tandem {
namespace {

class GrpcJsConformanceTest : public ::testing::TestWithParam<const char*> {};

TEST_P(GrpcJsConformanceTest, GenerateStream) {
  const std::string node = TANDEM_NODE_EXECUTABLE;
  ASSERT_FALSE(node.empty()) << "node was not found at configure time: run "
                                "scripts/install-deps.sh and re-run cmake";
  ASSERT_EQ(::access(node.c_str(), X_OK), 0) << node << " is not executable";
  std::string grpc_js =
      std::string(TANDEM_SOURCE_DIR) + "/tests/conformance/node_modules/@grpc/grpc-js";
  ASSERT_EQ(::access(grpc_js.c_str(), R_OK), 0)
      << grpc_js << " is missing: run scripts/install-deps.sh";
  std::string missing =
      MissingBinaries({"tandem-cluster", "tandem-router", "tandem-prefill", "tandem-decode"});
  ASSERT_EQ(missing, "") << missing;

  std::string mode = GetParam();
  std::vector<std::string> args = {
      "--model", TestModelDir("llama"), "--mode", mode, "--decode", "1", "--threads-per-node",
      "1",       "--startup-timeout-s", "120"};
  if (mode == "disaggregated") {
    args.insert(args.end(), {"--prefill", "1"});
  }
  // Logs and tandem-cluster's private temp dir in one test dir, removed at the end.
  std::string tmp_dir = MakeTestTempDir("grpc_js_conformance_");
  struct RemoveOnExit {
    std::string dir;
    ~RemoveOnExit() {
      std::error_code ec;
      std::filesystem::remove_all(dir, ec);
    }
  } remove_tmp_dir{tmp_dir};
  args.insert(args.end(), {"--log-dir", tmp_dir + "/logs"});
  LaunchedProcess::Options options;
  options.env = {{"TMPDIR", tmp_dir}};
  auto cluster = LaunchedProcess::Start(BinaryPath("tandem-cluster"), args, options);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  absl::StatusOr<std::string> router = (*cluster)->WaitReady(absl::Seconds(150));
  ASSERT_TRUE(router.ok()) << router.status();

  CommandResult r =
      RunCommand(node,
                 {std::string(TANDEM_SOURCE_DIR) + "/tests/conformance/grpc_js/generate_stream.mjs",
                  *router, "--max-tokens", "8"},
                 {}, absl::Seconds(240));
  std::printf("%s", r.stdout_text.c_str());
  EXPECT_EQ(r.exit_code, 0) << r.stdout_text << r.stderr_text << "\n--- tandem-cluster ---\n"
                            << (*cluster)->LogTail();
  EXPECT_NE(r.stdout_text.find(" passed, 0 failed"), std::string::npos);

  (*cluster)->Signal(SIGINT);
  std::optional<int> status = (*cluster)->WaitExit(absl::Seconds(60));
  ASSERT_TRUE(status.has_value());
  EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 0) << (*cluster)->LogTail();
  if (HasFailure()) {
    for (const char* name : {"router", "prefill-0", "decode-0"}) {
      std::string log = tmp_dir + "/logs/" + name + ".log";
      std::printf("--- %s ---\n%s\n", log.c_str(), ReadFileTail(log, 30).c_str());
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Modes, GrpcJsConformanceTest,
                         ::testing::Values("disaggregated", "colocated"),
                         [](const auto& info) { return std::string(info.param); });

}  // namespace
}  // namespace tandem
