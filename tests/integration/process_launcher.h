// Starting real binaries from integration tests: a server (or tandem-cluster) with arguments and
// environment, its output in a log file, waiting for its ready file and reading the gRPC address
// it picked, signals, kill -9, waiting for exit, and cleanup in the destructor. Every file lives
// in a private mkdtemp directory, so parallel ctest processes never share a path or a port.
#ifndef TANDEM_TESTS_INTEGRATION_PROCESS_LAUNCHER_H_
#define TANDEM_TESTS_INTEGRATION_PROCESS_LAUNCHER_H_

#include <sys/types.h>

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "tools/cluster/child_process.h"
#include "tools/cluster/ready_file.h"

namespace tandem {

using EnvVars = std::vector<std::pair<std::string, std::string>>;

// `${TANDEM_BINARY_DIR}/bin/<name>`: where the build puts tandem's binaries.
std::string BinaryPath(const std::string& name);

// "" when every named binary exists in the build's bin dir, else a message listing the missing
// ones and the targets to build.
std::string MissingBinaries(const std::vector<std::string>& names);

// A new private directory under the test's temp dir (TEST_TMPDIR or /tmp), named
// `<prefix>XXXXXX`. Aborts the test binary if it cannot be made.
std::string MakeTestTempDir(const std::string& prefix);

// True while `pid` exists and is not a zombie.
bool ProcessAlive(pid_t pid);

// Waits up to `timeout` for every pid to be gone; returns the ones still alive.
std::vector<pid_t> WaitForProcessesGone(const std::vector<pid_t>& pids, absl::Duration timeout);

class LaunchedProcess {
 public:
  struct Options {
    EnvVars env;  // on top of the test's environment
    // Append "--ready-file <work_dir>/ready.json" to the arguments (the servers' contract).
    bool add_ready_file_flag = true;
    // The child gets SIGKILL if the test process dies.
    bool die_with_parent = true;
  };

  // Starts `binary args...` with stdout and stderr in <work_dir>/process.log. Fails (naming the
  // binary) when it cannot be executed.
  static absl::StatusOr<std::unique_ptr<LaunchedProcess>> Start(const std::string& binary,
                                                                std::vector<std::string> args,
                                                                Options options);
  static absl::StatusOr<std::unique_ptr<LaunchedProcess>> Start(const std::string& binary,
                                                                std::vector<std::string> args) {
    return Start(binary, std::move(args), Options());
  }

  // SIGKILLs the process if it still runs, reaps it, and removes the work directory (kept when
  // TANDEM_KEEP_TEST_DIRS=1).
  ~LaunchedProcess();

  // Waits until the ready file is valid and returns the gRPC address. Errors (the process exited,
  // the timeout passed) carry the tail of the log.
  absl::StatusOr<std::string> WaitReady(absl::Duration timeout = absl::Seconds(120));

  pid_t pid() const { return child_->pid(); }
  const std::string& work_dir() const { return work_dir_; }
  const std::string& log_path() const { return log_path_; }
  const std::string& ready_file() const { return ready_file_; }
  // Valid after WaitReady succeeded.
  const std::string& grpc_address() const { return ready_.grpc; }
  const ReadyInfo& ready() const { return ready_; }
  // The ready file's raw text (after WaitReady), for callers that need more than grpc/pid.
  std::string ReadyFileText() const;

  std::string Log() const;
  std::string LogTail(int lines = 40) const;

  bool Running() { return child_->Running(); }
  void Signal(int sig) { child_->Signal(sig); }
  void Kill();  // SIGKILL
  // Waits for the process to exit; returns its raw wait status, nullopt on timeout.
  std::optional<int> WaitExit(absl::Duration timeout);
  // "exited with status N" / "killed by signal N (...)" / "running".
  std::string DescribeExit() const { return child_->DescribeExit(); }

 private:
  LaunchedProcess() = default;

  std::string work_dir_;
  std::string log_path_;
  std::string ready_file_;
  std::unique_ptr<ChildProcess> child_;
  ReadyInfo ready_;
};

struct CommandResult {
  int exit_code = -1;  // -1 when killed by a signal or timed out
  bool timed_out = false;
  std::string stdout_text;
  std::string stderr_text;
};

// Runs `binary args...` to completion (SIGKILL after `timeout`) and captures its output.
CommandResult RunCommand(const std::string& binary, const std::vector<std::string>& args,
                         const EnvVars& env = {}, absl::Duration timeout = absl::Seconds(300));

}  // namespace tandem

#endif  // TANDEM_TESTS_INTEGRATION_PROCESS_LAUNCHER_H_
