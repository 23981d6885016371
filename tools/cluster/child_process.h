// A child process started with fork/exec (no shell): its own process group, stdout/stderr into
// log files, extra environment, and (optionally) killed by the kernel when the thread that
// started it dies — so a launcher killed with SIGKILL leaves no servers behind. Signals, waits
// with timeouts and a SIGTERM-then-SIGKILL stop. Used by tandem-cluster and by the integration
// tests' process launcher.
#ifndef TANDEM_TOOLS_CLUSTER_CHILD_PROCESS_H_
#define TANDEM_TOOLS_CLUSTER_CHILD_PROCESS_H_

#include <sys/types.h>

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace tandem {

struct ChildSpec {
  std::string binary;             // path to an executable (not looked up in PATH)
  std::vector<std::string> args;  // argv[1..]; argv[0] is `binary`
  // Set (or override) these variables on top of the launcher's environment.
  std::vector<std::pair<std::string, std::string>> env;
  // Where stdout and stderr go (created/truncated). Empty stdout_path: inherit the launcher's.
  // Empty stderr_path: the same file as stdout.
  std::string stdout_path;
  std::string stderr_path;
  // PR_SET_PDEATHSIG(SIGKILL): the child dies when the launching thread dies.
  bool die_with_parent = true;
  // setpgid(0, 0): a terminal's Ctrl-C reaches only the launcher, which stops children in order.
  bool own_process_group = true;
};

class ChildProcess {
 public:
  // Starts the child. Fails (and leaves nothing running) when the binary is missing or cannot be
  // executed, or a log file cannot be opened; the message names the path.
  static absl::StatusOr<std::unique_ptr<ChildProcess>> Spawn(const ChildSpec& spec);

  // Kills (SIGKILL) and reaps the child if it is still running.
  ~ChildProcess();
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  pid_t pid() const { return pid_; }
  const ChildSpec& spec() const { return spec_; }

  // Reaps the child without blocking if it has exited; true while it runs.
  bool Running();
  // The raw wait status once the child has been reaped (see Running / WaitFor).
  std::optional<int> wait_status() const { return wait_status_; }
  // "exited with status 1", "killed by signal 9 (Killed)", or "running".
  std::string DescribeExit() const;
  // True when reaped with exit status 0.
  bool ExitedCleanly() const;

  // Sends `sig` to the child (a no-op once it has been reaped).
  void Signal(int sig);
  // Waits up to `timeout` for the child to exit; true when it has.
  bool WaitFor(absl::Duration timeout);
  // SIGTERM, up to `grace` for it to exit, then SIGKILL and reap. True when it exited in grace.
  bool Stop(absl::Duration grace);

 private:
  ChildProcess(ChildSpec spec, pid_t pid) : spec_(std::move(spec)), pid_(pid) {}

  ChildSpec spec_;
  pid_t pid_;
  std::optional<int> wait_status_;
};

// "exited with status N" / "killed by signal N (name)" for a raw wait status.
std::string DescribeWaitStatus(int wait_status);

// The last `max_lines` lines of a text file (at most the last 64 KiB), or "" if unreadable.
std::string ReadFileTail(const std::string& path, int max_lines);

}  // namespace tandem

#endif  // TANDEM_TOOLS_CLUSTER_CHILD_PROCESS_H_
