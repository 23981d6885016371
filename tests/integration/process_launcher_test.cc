// The integration tests' process launcher: ready file and address, log, signals, kill -9, exit
// status, cleanup, and RunCommand's captured output.
#include "tests/integration/process_launcher.h"

#include <signal.h>
#include <sys/wait.h>

#include <filesystem>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tandem {
namespace {

using ::testing::HasSubstr;

// A server stand-in: writes the ready file named by its last two arguments, logs, and exits 0
// on SIGTERM.
constexpr char kFakeServer[] = R"(
ready=""
while [ $# -gt 0 ]; do
  if [ "$1" = --ready-file ]; then ready=$2; shift; fi
  shift
done
trap 'echo "got SIGTERM"; exit 0' TERM
echo "env=$LAUNCHER_TEST"
printf '{"grpc": "127.0.0.1:4321", "pid": %d}' $$ > "$ready.tmp"; mv "$ready.tmp" "$ready"
while :; do sleep 0.02; done
)";

TEST(ProcessLauncherTest, ReadyAddressLogSignalAndCleanup) {
  LaunchedProcess::Options options;
  options.env = {{"LAUNCHER_TEST", "42"}};
  auto p = LaunchedProcess::Start("/bin/sh", {"-c", kFakeServer, "sh"}, options);
  ASSERT_TRUE(p.ok()) << p.status();
  std::string work_dir = (*p)->work_dir();
  EXPECT_TRUE(std::filesystem::is_directory(work_dir));
  absl::StatusOr<std::string> address = (*p)->WaitReady(absl::Seconds(30));
  ASSERT_TRUE(address.ok()) << address.status();
  EXPECT_EQ(*address, "127.0.0.1:4321");
  EXPECT_EQ((*p)->grpc_address(), "127.0.0.1:4321");
  EXPECT_EQ((*p)->ready().pid, (*p)->pid());
  EXPECT_THAT((*p)->Log(), HasSubstr("env=42"));
  EXPECT_TRUE((*p)->Running());
  EXPECT_TRUE(ProcessAlive((*p)->pid()));

  (*p)->Signal(SIGTERM);
  std::optional<int> status = (*p)->WaitExit(absl::Seconds(30));
  ASSERT_TRUE(status.has_value());
  EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 0);
  EXPECT_THAT((*p)->Log(), HasSubstr("got SIGTERM"));
  p->reset();
  EXPECT_FALSE(std::filesystem::exists(work_dir));
}

TEST(ProcessLauncherTest, KillAndDestructorLeaveNothingRunning) {
  auto p = LaunchedProcess::Start("/bin/sh", {"-c", kFakeServer, "sh"});
  ASSERT_TRUE(p.ok()) << p.status();
  ASSERT_TRUE((*p)->WaitReady(absl::Seconds(30)).ok());
  (*p)->Kill();
  std::optional<int> status = (*p)->WaitExit(absl::Seconds(30));
  ASSERT_TRUE(status.has_value());
  EXPECT_TRUE(WIFSIGNALED(*status));
  EXPECT_THAT((*p)->DescribeExit(), HasSubstr("killed by signal 9"));

  auto q = LaunchedProcess::Start("/bin/sh", {"-c", kFakeServer, "sh"});
  ASSERT_TRUE(q.ok()) << q.status();
  pid_t pid = (*q)->pid();
  q->reset();  // never waited for: the destructor kills and reaps
  EXPECT_FALSE(ProcessAlive(pid));
}

TEST(ProcessLauncherTest, WaitReadyFailsWithTheLogTailWhenTheProcessExits) {
  auto p = LaunchedProcess::Start("/bin/sh", {"-c", "echo 'bad model dir' >&2; exit 7", "sh"});
  ASSERT_TRUE(p.ok()) << p.status();
  absl::StatusOr<std::string> address = (*p)->WaitReady(absl::Seconds(30));
  ASSERT_FALSE(address.ok());
  EXPECT_THAT(std::string(address.status().message()), HasSubstr("exited with status 7"));
  EXPECT_THAT(std::string(address.status().message()), HasSubstr("bad model dir"));
}

TEST(ProcessLauncherTest, WaitReadyTimesOut) {
  auto p = LaunchedProcess::Start("/bin/sh", {"-c", "sleep 30", "sh"});
  ASSERT_TRUE(p.ok()) << p.status();
  absl::StatusOr<std::string> address = (*p)->WaitReady(absl::Milliseconds(200));
  EXPECT_EQ(address.status().code(), absl::StatusCode::kDeadlineExceeded);
}

TEST(ProcessLauncherTest, MissingBinaryIsAnError) {
  auto p = LaunchedProcess::Start("/nonexistent/tandem-nothing", {});
  ASSERT_FALSE(p.ok());
  EXPECT_THAT(std::string(p.status().message()), HasSubstr("/nonexistent/tandem-nothing"));
  EXPECT_THAT(MissingBinaries({"tandem-no-such-binary"}),
              HasSubstr("tandem-no-such-binary (build them"));
}

TEST(RunCommandTest, CapturesOutputAndExitCode) {
  CommandResult r = RunCommand("/bin/sh", {"-c", "echo out; echo err >&2; exit 4"});
  EXPECT_EQ(r.exit_code, 4);
  EXPECT_FALSE(r.timed_out);
  EXPECT_EQ(r.stdout_text, "out\n");
  EXPECT_EQ(r.stderr_text, "err\n");
}

TEST(RunCommandTest, KillsAfterTheTimeout) {
  CommandResult r = RunCommand("/bin/sh", {"-c", "sleep 30"}, {}, absl::Milliseconds(200));
  EXPECT_TRUE(r.timed_out);
  EXPECT_EQ(r.exit_code, -1);
}

}  // namespace
}  // namespace tandem
