// tandem-cluster with the real servers (tandem-router, tandem-prefill, tandem-decode) on a tiny
// random-weight Llama: a one-shot --prompt run, tandem-cli against a running cluster, and the
// stop on SIGINT / kill -9 leaving no child behind. Fails (does not skip) when a server binary
// is missing from the build.
#include <signal.h>
#include <sys/wait.h>

#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/integration/process_launcher.h"
#include "tests/integration/test_model_dir.h"

namespace tandem {
namespace {

using ::testing::HasSubstr;
using ::testing::IsEmpty;

const std::vector<std::string> kBinaries = {"tandem-cluster", "tandem-cli", "tandem-router",
                                            "tandem-prefill", "tandem-decode"};

class ClusterE2eTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string missing = MissingBinaries(kBinaries);
    ASSERT_EQ(missing, "") << "the end-to-end cluster tests need the real servers: " << missing;
    model_ = TestModelDir("llama");
    tmp_dir_ = MakeTestTempDir("cluster_e2e_");
    log_dir_ = tmp_dir_ + "/logs";
  }
  void TearDown() override {
    if (HasFailure()) {
      // The servers' logs say why; print their tails before the directory goes.
      std::error_code ec;
      for (const auto& entry : std::filesystem::directory_iterator(log_dir_, ec)) {
        std::fprintf(stderr, "--- %s ---\n%s\n", entry.path().c_str(),
                     ReadFileTail(entry.path().string(), 30).c_str());
      }
    }
    std::filesystem::remove_all(tmp_dir_);
  }

  // tandem-cluster's private temp dir goes under tmp_dir_, so a killed launcher leaves nothing.
  EnvVars Env() { return {{"TMPDIR", tmp_dir_}}; }
  LaunchedProcess::Options LaunchOptions() {
    LaunchedProcess::Options options;
    options.env = Env();
    return options;
  }

  // A 1 prefill + 1 decode cluster, one thread per node (ctest runs tests side by side).
  std::vector<std::string> ClusterArgs(std::vector<std::string> extra) {
    std::vector<std::string> args = {"--model",   model_,   "--prefill",           "1",
                                     "--decode",  "1",      "--threads-per-node",  "1",
                                     "--log-dir", log_dir_, "--startup-timeout-s", "120"};
    args.insert(args.end(), extra.begin(), extra.end());
    return args;
  }

  std::string model_;
  std::string tmp_dir_;
  std::string log_dir_;
};

int ExitCode(const std::optional<int>& status) {
  return status.has_value() && WIFEXITED(*status) ? WEXITSTATUS(*status) : -1;
}

TEST_F(ClusterE2eTest, PromptPrintsTextAndExitsZero) {
  CommandResult r = RunCommand(BinaryPath("tandem-cluster"),
                               ClusterArgs({"--prompt", "Hello", "--max-tokens", "8"}), Env(),
                               absl::Seconds(240));
  ASSERT_EQ(r.exit_code, 0) << r.stderr_text;
  ASSERT_FALSE(r.stdout_text.empty());
  EXPECT_EQ(r.stdout_text.back(), '\n');
  EXPECT_GT(r.stdout_text.size(), 1u) << "no text streamed";
  EXPECT_THAT(r.stderr_text, HasSubstr("router gRPC: 127.0.0.1:"));
}

TEST_F(ClusterE2eTest, CliStreamsFromARunningClusterAndSigintStopsEveryChild) {
  auto cluster =
      LaunchedProcess::Start(BinaryPath("tandem-cluster"), ClusterArgs({}), LaunchOptions());
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  absl::StatusOr<std::string> router = (*cluster)->WaitReady(absl::Seconds(150));
  ASSERT_TRUE(router.ok()) << router.status();
  nlohmann::json endpoints = nlohmann::json::parse((*cluster)->ReadyFileText());
  std::vector<pid_t> pids;
  for (const auto& p : endpoints["processes"]) pids.push_back(p["pid"].get<pid_t>());
  ASSERT_EQ(pids.size(), 3u);

  // tandem-cli, greedy, JSON lines: the last carries finish_reason and usage.
  CommandResult cli = RunCommand(BinaryPath("tandem-cli"),
                                 {"--router", *router, "--prompt", "Hello", "--max-tokens", "6",
                                  "--temperature", "0", "--ignore-eos", "--json"});
  ASSERT_EQ(cli.exit_code, 0) << cli.stderr_text;
  std::vector<nlohmann::json> lines;
  std::istringstream in(cli.stdout_text);
  for (std::string line; std::getline(in, line);) lines.push_back(nlohmann::json::parse(line));
  ASSERT_FALSE(lines.empty());
  EXPECT_EQ(lines.back()["finish_reason"], "length");
  EXPECT_EQ(lines.back()["usage"]["completion_tokens"], 6);
  // Plain text mode: something printed, then a newline.
  CommandResult text = RunCommand(BinaryPath("tandem-cli"),
                                  {"--router", *router, "--chat", "Hi!", "--max-tokens", "4"});
  ASSERT_EQ(text.exit_code, 0) << text.stderr_text;
  EXPECT_GT(text.stdout_text.size(), 1u);
  // Bad input: the router's INVALID_ARGUMENT reaches the user.
  CommandResult bad = RunCommand(BinaryPath("tandem-cli"), {"--router", *router, "--prompt", ""});
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_THAT(bad.stderr_text, HasSubstr("INVALID_ARGUMENT"));

  (*cluster)->Signal(SIGINT);
  EXPECT_EQ(ExitCode((*cluster)->WaitExit(absl::Seconds(60))), 0) << (*cluster)->LogTail();
  EXPECT_THAT(WaitForProcessesGone(pids, absl::Seconds(10)), IsEmpty());
}

TEST_F(ClusterE2eTest, KillNineOfTheLauncherTakesEveryChildAlong) {
  auto cluster =
      LaunchedProcess::Start(BinaryPath("tandem-cluster"), ClusterArgs({}), LaunchOptions());
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  ASSERT_TRUE((*cluster)->WaitReady(absl::Seconds(150)).ok()) << (*cluster)->LogTail();
  nlohmann::json endpoints = nlohmann::json::parse((*cluster)->ReadyFileText());
  std::vector<pid_t> pids;
  for (const auto& p : endpoints["processes"]) pids.push_back(p["pid"].get<pid_t>());
  (*cluster)->Kill();
  ASSERT_TRUE((*cluster)->WaitExit(absl::Seconds(10)).has_value());
  EXPECT_THAT(WaitForProcessesGone(pids, absl::Seconds(10)), IsEmpty());
}

}  // namespace
}  // namespace tandem
