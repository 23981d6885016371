// The tandem-router binary: --help, flag errors, the ready file, serving Generate against fake
// nodes, and a graceful drain on SIGTERM (an in-flight stream finishes, exit 0).
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "router/served_model.h"
#include "tests/router/fake_nodes.h"
#include "tests/router/router_test_util.h"

extern char** environ;

namespace tandem {
namespace {

using testing::DecodeScript;
using testing::FakeDecodeNode;
using testing::FakePrefillNode;
using ::testing::HasSubstr;
using testing::RouterStub;
using testing::RunGenerate;
using testing::StreamResult;

std::string RouterBinary() { return std::string(TANDEM_BINARY_DIR) + "/bin/tandem-router"; }

// A per-process scratch directory (ctest runs test cases in parallel processes).
const std::string& ScratchDir() {
  static const std::string* dir = [] {
    auto* path =
        new std::string(::testing::TempDir() + "/tandem_router_cli_" + std::to_string(::getpid()));
    std::filesystem::remove_all(*path);
    std::filesystem::create_directories(*path);
    return path;
  }();
  return *dir;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// A tandem-router child process; killed if the test ends without waiting for it.
class RouterProcess {
 public:
  explicit RouterProcess(const std::vector<std::string>& args, const std::string& name) {
    stderr_path_ = ScratchDir() + "/" + name + ".stderr";
    std::vector<std::string> argv_strings = {RouterBinary()};
    argv_strings.insert(argv_strings.end(), args.begin(), args.end());
    std::vector<char*> argv;
    for (std::string& s : argv_strings) argv.push_back(s.data());
    argv.push_back(nullptr);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, stderr_path_.c_str(),
                                     O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, (stderr_path_ + ".out").c_str(),
                                     O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (posix_spawn(&pid_, argv[0], &actions, nullptr, argv.data(), environ) != 0) pid_ = -1;
    posix_spawn_file_actions_destroy(&actions);
  }
  ~RouterProcess() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
  }

  bool started() const { return pid_ > 0; }
  void Signal(int sig) { ::kill(pid_, sig); }
  // Exit code, or -1 if it did not exit normally within `timeout`.
  int Wait(std::chrono::milliseconds timeout = std::chrono::milliseconds(20000)) {
    const auto end = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < end) {
      int status = 0;
      pid_t r = ::waitpid(pid_, &status, WNOHANG);
      if (r == pid_) {
        pid_ = -1;
        return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return -1;
  }
  std::string stderr_text() const { return ReadFile(stderr_path_); }
  std::string stdout_text() const { return ReadFile(stderr_path_ + ".out"); }

 private:
  pid_t pid_ = -1;
  std::string stderr_path_;
};

bool WaitForFile(const std::string& path, std::chrono::milliseconds timeout) {
  const auto end = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < end) {
    if (std::filesystem::exists(path)) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

TEST(RouterCliTest, HelpExitsZero) {
  RouterProcess router({"--help"}, "help");
  ASSERT_TRUE(router.started());
  EXPECT_EQ(router.Wait(), 0);
  EXPECT_THAT(router.stdout_text(), HasSubstr("--local-prefill-threshold"));
  EXPECT_THAT(router.stdout_text(), HasSubstr("--prefill-dns"));
}

TEST(RouterCliTest, FlagErrorsExitTwoNamingTheProblem) {
  struct Case {
    std::vector<std::string> args;
    std::string message;
  };
  const std::string model = TestModelDir("llama");
  std::vector<Case> cases = {
      {{"--decode", "127.0.0.1:1"}, "--model"},
      {{"--model", model}, "decode nodes"},
      {{"--model", model, "--decode", "127.0.0.1:1"}, "--prefill"},
      {{"--model", model, "--decode", "127.0.0.1:1", "--mode", "colocated", "--prefill",
        "127.0.0.1:2"},
       "colocated"},
      {{"--model", model, "--decode", "127.0.0.1:1", "--mode", "auto", "--prefill", "127.0.0.1:2"},
       "--mode auto uses the decode nodes"},
      {{"--model", model, "--decode", "127.0.0.1:1", "--mode", "both"}, "--mode"},
      {{"--model", model, "--decode", "127.0.0.1:1", "--prefill", "127.0.0.1:2", "--policy",
        "random"},
       "--policy"},
      {{"--model", model, "--decode", "127.0.0.1:1", "--prefill", "127.0.0.1:2", "--max-retries",
        "-1"},
       "--max-retries"},
      {{"--bogus"}, "unknown flag"},
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    RouterProcess router(cases[i].args, "flags" + std::to_string(i));
    ASSERT_TRUE(router.started());
    EXPECT_EQ(router.Wait(), 2) << cases[i].message;
    EXPECT_THAT(router.stderr_text(), HasSubstr(cases[i].message));
  }
}

TEST(RouterCliTest, BadModelDirectoryExitsOne) {
  RouterProcess router(
      {"--model", ScratchDir() + "/no-model", "--decode", "127.0.0.1:1", "--mode", "colocated"},
      "badmodel");
  ASSERT_TRUE(router.started());
  EXPECT_EQ(router.Wait(), 1);
  EXPECT_THAT(router.stderr_text(), HasSubstr("tokenizer.json"));
}

TEST(RouterCliTest, ServesWritesTheReadyFileAndDrainsOnSigterm) {
  auto model = LoadServedModel(TestModelDir("llama"), "");
  ASSERT_TRUE(model.ok()) << model.status();
  FakePrefillNode p;
  FakeDecodeNode d;
  DecodeScript script;
  script.tokens = (*model)->tokenizer->Encode(" from the binary", false);
  d.SetScript(script);

  // A fresh directory per run (--gtest_repeat reuses the process's scratch directory).
  static int run = 0;
  const std::string dir = ScratchDir() + "/serve" + std::to_string(++run);
  std::filesystem::create_directories(dir);
  const std::string ready = dir + "/ready.json";
  RouterProcess router({"--model", TestModelDir("llama"), "--served-model-name", "tiny", "--listen",
                        "127.0.0.1:0", "--ready-file", ready, "--prefill", p.address(), "--decode",
                        d.address(), "--health-interval-ms", "50"},
                       "serve");
  ASSERT_TRUE(router.started());
  ASSERT_TRUE(WaitForFile(ready, std::chrono::seconds(20))) << router.stderr_text();
  nlohmann::json info = nlohmann::json::parse(ReadFile(ready));
  ASSERT_TRUE(info["grpc"].is_string());
  EXPECT_TRUE(info["grpc"].get<std::string>().starts_with("127.0.0.1:"));
  EXPECT_GT(info["pid"].get<int>(), 0);
  // No temporary file is left next to it.
  int files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().filename().string().starts_with("ready.json")) ++files;
  }
  EXPECT_EQ(files, 1);

  auto stub = RouterStub(info["grpc"].get<std::string>());
  v1::GenerateRequest req;
  req.set_model("tiny");
  req.set_text("Hi");
  // The router probes its nodes on its own schedule: on a loaded machine the first 50 ms health
  // check can time out, and the nodes are up a probe later. Wait for that, not longer.
  StreamResult r = RunGenerate(*stub, req);
  for (int i = 0; i < 100 && r.status.error_code() == grpc::StatusCode::UNAVAILABLE; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    r = RunGenerate(*stub, req);
  }
  ASSERT_TRUE(r.status.ok()) << r.status.error_message() << "\n" << router.stderr_text();
  EXPECT_EQ(r.text(), " from the binary");

  // A slow stream is in flight when SIGTERM arrives: it finishes, then the router exits 0.
  script.token_interval = absl::Milliseconds(30);
  d.SetScript(script);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
  bool signalled = false;
  StreamResult slow = RunGenerate(*stub, req, &ctx, [&](size_t n) {
    if (n == 1 && !signalled) {
      signalled = true;
      router.Signal(SIGTERM);
    }
  });
  EXPECT_TRUE(signalled);
  ASSERT_TRUE(slow.status.ok()) << slow.status.error_message();
  EXPECT_EQ(slow.text(), " from the binary");
  EXPECT_EQ(router.Wait(), 0) << router.stderr_text();
  EXPECT_THAT(router.stderr_text(), HasSubstr("draining"));
}

}  // namespace
}  // namespace tandem
