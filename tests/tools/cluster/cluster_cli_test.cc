// tandem-cluster as a user runs it, with stand-in servers (fake_server.sh linked as
// tandem-prefill/-decode/-router into a temp bin dir) so start, endpoints, the ordered stop, a
// failing or dying member, SIGKILL escalation, kill -9 of the launcher and --prompt are all
// checked without the real servers. tandem-cluster --prompt talks to an in-process fake of the
// Generate API.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/integration/fake_generation_service.h"
#include "tests/integration/process_launcher.h"

namespace tandem {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

class ClusterCliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(MissingBinaries({"tandem-cluster"}), "");
    dir_ = MakeTestTempDir("cluster_cli_test_");
    bin_dir_ = dir_ + "/bin";
    log_dir_ = dir_ + "/logs";
    model_dir_ = dir_ + "/model";  // the fakes never read it; tandem-cluster checks it exists
    std::filesystem::create_directories(bin_dir_);
    std::filesystem::create_directories(model_dir_);
    for (const char* name : {"tandem-prefill", "tandem-decode", "tandem-router"}) {
      std::filesystem::create_symlink(TANDEM_FAKE_SERVER, bin_dir_ + "/" + name);
    }
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::vector<std::string> Args(std::vector<std::string> extra) {
    std::vector<std::string> args = {"--model",   model_dir_, "--bin-dir",           bin_dir_,
                                     "--log-dir", log_dir_,   "--prefill",           "1",
                                     "--decode",  "2",        "--startup-timeout-s", "20"};
    args.insert(args.end(), extra.begin(), extra.end());
    return args;
  }

  // Starts tandem-cluster with the fakes and waits for its own ready file.
  std::unique_ptr<LaunchedProcess> StartCluster(std::vector<std::string> extra, EnvVars env = {}) {
    LaunchedProcess::Options options;
    options.env = Env(std::move(env));
    auto cluster = LaunchedProcess::Start(BinaryPath("tandem-cluster"), Args(extra), options);
    EXPECT_TRUE(cluster.ok()) << cluster.status();
    if (!cluster.ok()) return nullptr;
    auto address = (*cluster)->WaitReady(absl::Seconds(30));
    EXPECT_TRUE(address.ok()) << address.status();
    if (!address.ok()) return nullptr;
    return *std::move(cluster);
  }

  // tandem-cluster's private temp dirs go under dir_, so even a killed launcher leaves nothing.
  EnvVars Env(EnvVars env = {}) {
    env.emplace_back("TMPDIR", dir_);
    return env;
  }

  std::string Log(const std::string& name) {
    std::ifstream in(log_dir_ + "/" + name + ".log");
    return std::string(std::istreambuf_iterator<char>(in), {});
  }

  std::string dir_, bin_dir_, log_dir_, model_dir_;
};

std::vector<pid_t> ChildPids(const nlohmann::json& endpoints) {
  std::vector<pid_t> pids;
  for (const auto& p : endpoints["processes"]) pids.push_back(p["pid"].get<pid_t>());
  return pids;
}

int ExitCode(const std::optional<int>& status) {
  return status.has_value() && WIFEXITED(*status) ? WEXITSTATUS(*status) : -1;
}

TEST_F(ClusterCliTest, HelpExitsZero) {
  CommandResult r = RunCommand(BinaryPath("tandem-cluster"), {"--help"});
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_THAT(r.stdout_text, HasSubstr("Usage: tandem-cluster --model DIR"));
  EXPECT_THAT(r.stdout_text, HasSubstr("--ucx-tls"));
}

TEST_F(ClusterCliTest, BadFlagsExitTwoWithAMessage) {
  struct Case {
    std::vector<std::string> args;
    std::string message;
  };
  std::vector<Case> cases = {
      {{}, "--model DIR is required"},
      {{"--model", model_dir_, "--decode", "x"}, "--decode expects an integer, got 'x'"},
      {{"--model", model_dir_, "--mode", "split"},
       "--mode expects disaggregated, colocated or auto"},
      {{"--model", model_dir_, "--prefill", "0"}, "needs at least one prefill node"},
      {{"--model", model_dir_, "--policy", "best"}, "--policy expects"},
      {{"--model", model_dir_, "--bogus"}, "unknown flag --bogus"},
      {{"--model", model_dir_, "--max-tokens"}, "--max-tokens needs a value"},
      {{"--model", dir_ + "/no-model"}, "is not a directory"},
      {{"--model", model_dir_, "--bin-dir", dir_ + "/no-bin"}, "--bin-dir"},
  };
  for (const Case& c : cases) {
    CommandResult r = RunCommand(BinaryPath("tandem-cluster"), c.args, Env());
    EXPECT_EQ(r.exit_code, 2) << r.stderr_text;
    EXPECT_THAT(r.stderr_text, HasSubstr(c.message));
    EXPECT_THAT(r.stderr_text, HasSubstr("tandem-cluster: "));
  }
}

TEST_F(ClusterCliTest, MissingServerBinariesFailClearlyBeforeStartingAnything) {
  std::filesystem::remove(bin_dir_ + "/tandem-decode");
  std::filesystem::remove(bin_dir_ + "/tandem-router");
  CommandResult r = RunCommand(BinaryPath("tandem-cluster"), Args({}), Env());
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.stderr_text, HasSubstr("cannot start the cluster: " + bin_dir_ +
                                       "/tandem-decode, " + bin_dir_ + "/tandem-router"));
  EXPECT_THAT(r.stderr_text, HasSubstr("is it built?"));
  EXPECT_FALSE(std::filesystem::exists(log_dir_ + "/prefill-0.log"));
}

TEST_F(ClusterCliTest, StartsEveryProcessPrintsEndpointsAndStopsOnSigint) {
  std::unique_ptr<LaunchedProcess> cluster =
      StartCluster({"--ucx-tls", "tcp", "--threads-per-node", "1", "--policy", "round_robin"});
  ASSERT_NE(cluster, nullptr);
  nlohmann::json endpoints = nlohmann::json::parse(cluster->ReadyFileText());
  ASSERT_EQ(endpoints["processes"].size(), 4u);
  EXPECT_EQ(endpoints["pid"], cluster->pid());
  EXPECT_EQ(endpoints["log_dir"], log_dir_);
  std::vector<std::string> names;
  std::map<std::string, std::string> grpc;
  for (const auto& p : endpoints["processes"]) {
    names.push_back(p["name"]);
    grpc[p["name"]] = p["grpc"];
    EXPECT_EQ(p["log"], log_dir_ + "/" + p["name"].get<std::string>() + ".log");
    EXPECT_EQ(p["metrics"], "127.0.0.1:9");  // extra ready-file fields are kept
    EXPECT_TRUE(ProcessAlive(p["pid"].get<pid_t>()));
  }
  EXPECT_THAT(names, ::testing::ElementsAre("prefill-0", "decode-0", "decode-1", "router"));
  EXPECT_EQ(endpoints["grpc"], grpc["router"]);

  // Nodes got their contract flags and UCX_TLS; the router got the nodes' picked addresses.
  EXPECT_THAT(Log("decode-1"), HasSubstr("--listen 127.0.0.1:0 --ready-file"));
  EXPECT_THAT(Log("decode-1"), HasSubstr("--node-id decode-1 --threads 1"));
  EXPECT_THAT(Log("decode-1"), HasSubstr("UCX_TLS=tcp"));
  EXPECT_THAT(Log("prefill-0"), HasSubstr("--metrics-listen 127.0.0.1:0"));
  EXPECT_THAT(Log("router"), HasSubstr("--http-listen 127.0.0.1:0 --metrics-listen 127.0.0.1:0"));
  EXPECT_THAT(Log("router"),
              HasSubstr("--prefill " + grpc["prefill-0"] + " --decode " + grpc["decode-0"] + "," +
                        grpc["decode-1"] + " --mode disaggregated --policy round_robin"));
  // The endpoint table on stdout names every process with its role, pid, address and log.
  std::string out = cluster->Log();
  EXPECT_THAT(out, HasSubstr("router gRPC: " + grpc["router"]));
  EXPECT_THAT(out, HasSubstr("metrics 127.0.0.1:9"));
  for (const auto& p : endpoints["processes"]) {
    EXPECT_THAT(out, HasSubstr("pid " + std::to_string(p["pid"].get<int>())));
    EXPECT_THAT(out, HasSubstr(p["log"].get<std::string>()));
  }

  cluster->Signal(SIGINT);
  EXPECT_EQ(ExitCode(cluster->WaitExit(absl::Seconds(30))), 0) << cluster->Log();
  EXPECT_THAT(WaitForProcessesGone(ChildPids(endpoints), absl::Seconds(5)), ::testing::IsEmpty());
  for (const char* name : {"prefill-0", "decode-0", "decode-1", "router"}) {
    EXPECT_THAT(Log(name), HasSubstr("SIGTERM")) << name;  // graceful, not killed
  }
  EXPECT_THAT(cluster->Log(), HasSubstr("stopping the cluster"));
  EXPECT_THAT(cluster->Log(), HasSubstr("UCX_TLS: tcp"));
  EXPECT_THAT(cluster->Log(), HasSubstr("try: tandem-cli --router " + grpc["router"]));
  // The private ready-file directory (under TMPDIR = dir_) is gone after a clean stop.
  for (const auto& entry : std::filesystem::directory_iterator(dir_)) {
    EXPECT_EQ(entry.path().filename().string().find("tandem-cluster-ready-"), std::string::npos)
        << entry.path();
  }
}

TEST_F(ClusterCliTest, SigtermStopsToo) {
  std::unique_ptr<LaunchedProcess> cluster = StartCluster({});
  ASSERT_NE(cluster, nullptr);
  nlohmann::json endpoints = nlohmann::json::parse(cluster->ReadyFileText());
  cluster->Signal(SIGTERM);
  EXPECT_EQ(ExitCode(cluster->WaitExit(absl::Seconds(30))), 0) << cluster->Log();
  EXPECT_THAT(WaitForProcessesGone(ChildPids(endpoints), absl::Seconds(5)), ::testing::IsEmpty());
}

TEST_F(ClusterCliTest, FailingNodeIsNamedWithItsLogTail) {
  CommandResult r =
      RunCommand(BinaryPath("tandem-cluster"), Args({}), Env({{"FAKE_FAIL", "decode-1"}}));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.stderr_text, HasSubstr("decode-1 (tandem-decode, pid "));
  EXPECT_THAT(r.stderr_text, HasSubstr("failed to start: it exited with status 3"));
  EXPECT_THAT(r.stderr_text, HasSubstr("fake decode-1: failing on purpose"));  // log tail
  EXPECT_THAT(r.stderr_text, HasSubstr(log_dir_ + "/decode-1.log"));
  // The others were started and are stopped again; the router never started.
  EXPECT_THAT(Log("prefill-0"), HasSubstr("SIGTERM"));
  EXPECT_THAT(Log("decode-0"), HasSubstr("SIGTERM"));
  EXPECT_FALSE(std::filesystem::exists(log_dir_ + "/router.log"));
}

TEST_F(ClusterCliTest, FailingRouterIsNamed) {
  CommandResult r =
      RunCommand(BinaryPath("tandem-cluster"), Args({}), Env({{"FAKE_FAIL", "router"}}));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.stderr_text, HasSubstr("router (tandem-router, pid "));
  EXPECT_THAT(r.stderr_text, HasSubstr("fake router: failing on purpose"));
}

TEST_F(ClusterCliTest, StartupTimeoutNamesTheSlowProcess) {
  // A node that never writes its ready file.
  std::filesystem::remove(bin_dir_ + "/tandem-decode");
  std::ofstream(bin_dir_ + "/tandem-decode") << "#!/bin/sh\nexec sleep 60\n";
  std::filesystem::permissions(bin_dir_ + "/tandem-decode", std::filesystem::perms::owner_all);
  CommandResult r =
      RunCommand(BinaryPath("tandem-cluster"), Args({"--startup-timeout-s", "1"}), Env());
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.stderr_text, HasSubstr("decode-0 (tandem-decode, pid "));
  EXPECT_THAT(r.stderr_text, HasSubstr("did not become ready within --startup-timeout-s 1"));
}

TEST_F(ClusterCliTest, DyingNodeStopsTheClusterWithAnError) {
  LaunchedProcess::Options options;
  options.env = Env({{"FAKE_DIE", "prefill-0"}, {"FAKE_DIE_AFTER_MS", "300"}});
  auto cluster = LaunchedProcess::Start(BinaryPath("tandem-cluster"), Args({}), options);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  std::optional<int> status = (*cluster)->WaitExit(absl::Seconds(30));
  EXPECT_EQ(ExitCode(status), 1) << (*cluster)->Log();
  std::string log = (*cluster)->Log();
  EXPECT_THAT(log, HasSubstr("prefill-0 (tandem-prefill, pid "));
  EXPECT_THAT(log, HasSubstr("exited with status 4"));
  EXPECT_THAT(log, HasSubstr("fake prefill-0: dying on purpose"));
  EXPECT_THAT(Log("decode-0"), HasSubstr("SIGTERM"));
  EXPECT_THAT(Log("router"), HasSubstr("SIGTERM"));
}

TEST_F(ClusterCliTest, ChildIgnoringSigtermIsKilledAfterTheGrace) {
  std::unique_ptr<LaunchedProcess> cluster =
      StartCluster({"--stop-grace-ms", "300"}, {{"FAKE_IGNORE_TERM", "decode-0"}});
  ASSERT_NE(cluster, nullptr);
  nlohmann::json endpoints = nlohmann::json::parse(cluster->ReadyFileText());
  cluster->Signal(SIGINT);
  EXPECT_EQ(ExitCode(cluster->WaitExit(absl::Seconds(30))), 0) << cluster->Log();
  EXPECT_THAT(cluster->Log(), HasSubstr("decode-0 (tandem-decode, pid "));
  EXPECT_THAT(cluster->Log(), HasSubstr("of SIGTERM; killed"));
  EXPECT_THAT(WaitForProcessesGone(ChildPids(endpoints), absl::Seconds(5)), ::testing::IsEmpty());
}

TEST_F(ClusterCliTest, ChildrenDieWhenTheLauncherIsKilled) {
  std::unique_ptr<LaunchedProcess> cluster = StartCluster({});
  ASSERT_NE(cluster, nullptr);
  nlohmann::json endpoints = nlohmann::json::parse(cluster->ReadyFileText());
  std::vector<pid_t> pids = ChildPids(endpoints);
  cluster->Kill();
  ASSERT_TRUE(cluster->WaitExit(absl::Seconds(10)).has_value());
  EXPECT_THAT(WaitForProcessesGone(pids, absl::Seconds(10)), ::testing::IsEmpty());
}

TEST_F(ClusterCliTest, ColocatedStartsNoPrefillNodes) {
  std::vector<std::string> args = {"--model", model_dir_, "--bin-dir", bin_dir_,   "--log-dir",
                                   log_dir_,  "--mode",   "colocated", "--decode", "1"};
  LaunchedProcess::Options options;
  options.env = Env();
  auto cluster = LaunchedProcess::Start(BinaryPath("tandem-cluster"), args, options);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  ASSERT_TRUE((*cluster)->WaitReady(absl::Seconds(30)).ok()) << (*cluster)->Log();
  nlohmann::json endpoints = nlohmann::json::parse((*cluster)->ReadyFileText());
  ASSERT_EQ(endpoints["processes"].size(), 2u);
  EXPECT_EQ(endpoints["mode"], "colocated");
  EXPECT_THAT(Log("router"), HasSubstr("--mode colocated"));
  EXPECT_THAT(Log("router"), Not(HasSubstr("--prefill")));
  (*cluster)->Signal(SIGINT);
  EXPECT_EQ(ExitCode((*cluster)->WaitExit(absl::Seconds(30))), 0);
}

TEST_F(ClusterCliTest, PromptStreamsTheCompletionToStdoutThenStops) {
  FakeGenerationServer fake;
  FakeGenerationService::Script script;
  script.responses = {TextResponse("Hello", 1), TextResponse(", world", 2), TextResponse("!", 3)};
  script.responses.back().set_finish_reason("length");
  fake.service().SetScript(script);
  CommandResult r =
      RunCommand(BinaryPath("tandem-cluster"),
                 Args({"--prompt", "Say hi", "--max-tokens", "3", "--temperature", "0"}),
                 Env({{"FAKE_GRPC_ADDR", fake.address()}}));
  EXPECT_EQ(r.exit_code, 0) << r.stderr_text;
  EXPECT_EQ(r.stdout_text, "Hello, world!\n");  // endpoints go to stderr in this mode
  EXPECT_THAT(r.stderr_text, HasSubstr("router gRPC: " + fake.address()));
  std::vector<v1::GenerateRequest> requests = fake.service().requests();
  ASSERT_EQ(requests.size(), 1u);
  EXPECT_EQ(requests[0].text(), "Say hi");
  EXPECT_EQ(requests[0].sampling().max_tokens(), 3);
  EXPECT_EQ(requests[0].sampling().temperature(), 0.0f);
  EXPECT_TRUE(requests[0].sampling().has_temperature());
  EXPECT_THAT(Log("router"), HasSubstr("SIGTERM"));
  EXPECT_THAT(Log("decode-1"), HasSubstr("SIGTERM"));
}

TEST_F(ClusterCliTest, PromptFailureExitsNonZeroWithTheStatus) {
  FakeGenerationServer fake;
  FakeGenerationService::Script script;
  script.status = grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "prompt is empty");
  fake.service().SetScript(script);
  CommandResult r = RunCommand(BinaryPath("tandem-cluster"), Args({"--prompt", "x"}),
                               Env({{"FAKE_GRPC_ADDR", fake.address()}}));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.stderr_text, HasSubstr("Generate failed: INVALID_ARGUMENT: prompt is empty"));
}

TEST_F(ClusterCliTest, SigintDuringPromptCancelsAndStops) {
  FakeGenerationServer fake;
  FakeGenerationService::Script script;
  script.responses = {TextResponse("partial", 1)};
  script.wait_for_cancel = true;
  fake.service().SetScript(script);
  LaunchedProcess::Options options;
  options.env = Env({{"FAKE_GRPC_ADDR", fake.address()}});
  options.add_ready_file_flag = false;
  auto cluster =
      LaunchedProcess::Start(BinaryPath("tandem-cluster"), Args({"--prompt", "x"}), options);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  absl::Time deadline = absl::Now() + absl::Seconds(30);
  while ((*cluster)->Log().find("partial") == std::string::npos && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(20));
  }
  ASSERT_THAT((*cluster)->Log(), HasSubstr("partial"));
  (*cluster)->Signal(SIGINT);
  EXPECT_EQ(ExitCode((*cluster)->WaitExit(absl::Seconds(30))), 1) << (*cluster)->Log();
  EXPECT_THAT((*cluster)->Log(), HasSubstr("before the completion finished"));
  deadline = absl::Now() + absl::Seconds(5);
  while (fake.service().cancelled_calls() == 0 && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(20));
  }
  EXPECT_EQ(fake.service().cancelled_calls(), 1);
}

}  // namespace
}  // namespace tandem
