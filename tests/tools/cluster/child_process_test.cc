// ChildProcess: fork/exec without a shell, log files, environment, exit descriptions, stop
// escalation, exec failures, and the ready-file wait.
#include "tools/cluster/child_process.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/integration/process_launcher.h"
#include "tools/cluster/ready_file.h"

namespace tandem {
namespace {

using ::testing::HasSubstr;

std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

class ChildProcessTest : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = MakeTestTempDir("child_process_test_"); }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  ChildSpec Shell(const std::string& script) {
    ChildSpec spec;
    spec.binary = "/bin/sh";
    spec.args = {"-c", script};
    spec.stdout_path = dir_ + "/out.log";
    return spec;
  }

  std::string dir_;
};

TEST_F(ChildProcessTest, RunsWithArgumentsEnvironmentAndLogFile) {
  ChildSpec spec = Shell("echo \"arg=$0 env=$TANDEM_CHILD_TEST\"; echo oops >&2; exit 3");
  spec.args.push_back("first arg with spaces");
  spec.env = {{"TANDEM_CHILD_TEST", "yes"}};
  auto child = ChildProcess::Spawn(spec);
  ASSERT_TRUE(child.ok()) << child.status();
  ASSERT_TRUE((*child)->WaitFor(absl::Seconds(10)));
  EXPECT_FALSE((*child)->Running());
  EXPECT_EQ((*child)->DescribeExit(), "exited with status 3");
  EXPECT_FALSE((*child)->ExitedCleanly());
  // Arguments pass through verbatim (no shell re-splitting); stdout and stderr share the log.
  EXPECT_EQ(ReadAll(spec.stdout_path), "arg=first arg with spaces env=yes\noops\n");
}

TEST_F(ChildProcessTest, SeparateStderrFile) {
  ChildSpec spec = Shell("echo out; echo err >&2");
  spec.stderr_path = dir_ + "/err.log";
  auto child = ChildProcess::Spawn(spec);
  ASSERT_TRUE(child.ok()) << child.status();
  ASSERT_TRUE((*child)->WaitFor(absl::Seconds(10)));
  EXPECT_TRUE((*child)->ExitedCleanly());
  EXPECT_EQ(ReadAll(spec.stdout_path), "out\n");
  EXPECT_EQ(ReadAll(spec.stderr_path), "err\n");
}

TEST_F(ChildProcessTest, MissingBinaryIsNotFoundAndNamesThePath) {
  ChildSpec spec;
  spec.binary = dir_ + "/no-such-binary";
  auto child = ChildProcess::Spawn(spec);
  ASSERT_FALSE(child.ok());
  EXPECT_EQ(child.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(child.status().message()), HasSubstr(spec.binary));
}

TEST_F(ChildProcessTest, NonExecutableFileIsRejected) {
  std::string path = dir_ + "/not-executable";
  std::ofstream(path) << "#!/bin/sh\n";
  ChildSpec spec;
  spec.binary = path;
  auto child = ChildProcess::Spawn(spec);
  ASSERT_FALSE(child.ok());
  EXPECT_THAT(std::string(child.status().message()), HasSubstr("not an executable file"));
}

TEST_F(ChildProcessTest, ExecFailureIsReportedFromTheChild) {
  // Executable bit set, but the kernel cannot run it (no #! line, not ELF): execve fails in the
  // child after fork and the parent must learn why.
  std::string path = dir_ + "/garbage";
  std::ofstream(path) << "\x7f"
                         "ELF garbage";
  std::filesystem::permissions(path, std::filesystem::perms::owner_all);
  ChildSpec spec;
  spec.binary = path;
  auto child = ChildProcess::Spawn(spec);
  ASSERT_FALSE(child.ok());
  EXPECT_THAT(std::string(child.status().message()), HasSubstr("cannot execute " + path));
}

TEST_F(ChildProcessTest, UnopenableLogFileIsAnError) {
  ChildSpec spec = Shell("true");
  spec.stdout_path = dir_ + "/missing-dir/out.log";
  auto child = ChildProcess::Spawn(spec);
  ASSERT_FALSE(child.ok());
  EXPECT_THAT(std::string(child.status().message()), HasSubstr("missing-dir/out.log"));
}

TEST_F(ChildProcessTest, StopSendsSigtermFirst) {
  auto child = ChildProcess::Spawn(
      Shell("trap 'echo got-term; exit 0' TERM; echo started; while :; do sleep 0.02; done"));
  ASSERT_TRUE(child.ok()) << child.status();
  // Wait until the trap is installed.
  absl::Time deadline = absl::Now() + absl::Seconds(10);
  while (ReadAll(dir_ + "/out.log").find("started") == std::string::npos &&
         absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  EXPECT_TRUE((*child)->Running());
  EXPECT_TRUE((*child)->Stop(absl::Seconds(10)));
  EXPECT_TRUE((*child)->ExitedCleanly()) << (*child)->DescribeExit();
  EXPECT_THAT(ReadAll(dir_ + "/out.log"), HasSubstr("got-term"));
}

TEST_F(ChildProcessTest, StopEscalatesToSigkill) {
  auto child =
      ChildProcess::Spawn(Shell("trap '' TERM; echo started; while :; do sleep 0.02; done"));
  ASSERT_TRUE(child.ok()) << child.status();
  absl::Time deadline = absl::Now() + absl::Seconds(10);
  while (ReadAll(dir_ + "/out.log").find("started") == std::string::npos &&
         absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  EXPECT_FALSE((*child)->Stop(absl::Milliseconds(200)));
  ASSERT_TRUE((*child)->wait_status().has_value());
  EXPECT_TRUE(WIFSIGNALED(*(*child)->wait_status()));
  EXPECT_THAT((*child)->DescribeExit(), HasSubstr("killed by signal 9"));
}

TEST_F(ChildProcessTest, DestructorKillsARunningChild) {
  pid_t pid;
  {
    auto child = ChildProcess::Spawn(Shell("while :; do sleep 0.02; done"));
    ASSERT_TRUE(child.ok()) << child.status();
    pid = (*child)->pid();
    EXPECT_TRUE(ProcessAlive(pid));
  }
  EXPECT_FALSE(ProcessAlive(pid));
}

TEST_F(ChildProcessTest, ChildHasItsOwnProcessGroupAndAnUnblockedSignalMask) {
  // The launcher blocks SIGINT/SIGTERM for sigtimedwait; the child must not inherit that.
  sigset_t block, old;
  sigemptyset(&block);
  sigaddset(&block, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &block, &old);
  auto child = ChildProcess::Spawn(
      Shell("grep -E '^SigBlk' /proc/self/status; cut -d' ' -f5 /proc/$$/stat; echo pid=$$"));
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  ASSERT_TRUE(child.ok()) << child.status();
  ASSERT_TRUE((*child)->WaitFor(absl::Seconds(10)));
  std::string out = ReadAll(dir_ + "/out.log");
  EXPECT_THAT(out, HasSubstr("SigBlk:\t0000000000000000"));
  // Field 5 of /proc/PID/stat is the process group: the shell leads its own.
  pid_t pid = (*child)->pid();
  EXPECT_THAT(out, HasSubstr(std::to_string(pid) + "\npid=" + std::to_string(pid)));
}

TEST(ReadFileTailTest, LastLines) {
  std::string dir = MakeTestTempDir("tail_test_");
  std::string path = dir + "/log";
  std::ofstream(path) << "one\ntwo\nthree\nfour\n";
  EXPECT_EQ(ReadFileTail(path, 2), "three\nfour");
  EXPECT_EQ(ReadFileTail(path, 10), "one\ntwo\nthree\nfour");
  EXPECT_EQ(ReadFileTail(dir + "/missing", 3), "");
  std::filesystem::remove_all(dir);
}

TEST(DescribeWaitStatusTest, ExitAndSignal) {
  EXPECT_EQ(DescribeWaitStatus(0), "exited with status 0");
  EXPECT_EQ(DescribeWaitStatus(2 << 8), "exited with status 2");
  EXPECT_THAT(DescribeWaitStatus(SIGKILL), HasSubstr("killed by signal 9"));
}

}  // namespace
}  // namespace tandem
