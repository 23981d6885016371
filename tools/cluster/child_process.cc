#include "tools/cluster/child_process.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <map>
#include <thread>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"

extern char** environ;

namespace tandem {
namespace {

// Opens `path` for the child's output: created or truncated, closed on exec in the parent.
absl::StatusOr<int> OpenLog(const std::string& path) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    return absl::InternalError(absl::StrCat("cannot open log file ", path, ": ", strerror(errno)));
  }
  return fd;
}

// Everything the forked child needs, prepared before fork: after it only async-signal-safe
// calls are allowed (the parent may have other threads, e.g. gRPC's).
struct ExecPlan {
  std::vector<std::string> argv_storage;
  std::vector<std::string> env_storage;
  std::vector<char*> argv;
  std::vector<char*> envp;
};

ExecPlan MakeExecPlan(const ChildSpec& spec) {
  ExecPlan plan;
  plan.argv_storage.push_back(spec.binary);
  plan.argv_storage.insert(plan.argv_storage.end(), spec.args.begin(), spec.args.end());
  std::map<std::string, std::string> overrides(spec.env.begin(), spec.env.end());
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    std::string entry = *e;
    std::string name = entry.substr(0, entry.find('='));
    if (overrides.count(name) == 0) plan.env_storage.push_back(std::move(entry));
  }
  for (const auto& [name, value] : overrides) plan.env_storage.push_back(name + "=" + value);
  for (std::string& s : plan.argv_storage) plan.argv.push_back(s.data());
  plan.argv.push_back(nullptr);
  for (std::string& s : plan.env_storage) plan.envp.push_back(s.data());
  plan.envp.push_back(nullptr);
  return plan;
}

// Makes `fd` the child's `target` descriptor, inheritable across exec.
void MoveFd(int fd, int target) {
  if (fd == target) {
    ::fcntl(fd, F_SETFD, 0);
  } else {
    ::dup2(fd, target);
  }
}

// Runs in the child between fork and exec. Async-signal-safe calls only.
[[noreturn]] void ExecChild(const ChildSpec& spec, const ExecPlan& plan, pid_t parent, int stdin_fd,
                            int stdout_fd, int stderr_fd, int error_fd) {
  if (spec.own_process_group) ::setpgid(0, 0);
  if (spec.die_with_parent) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    // The parent may have died before prctl took effect.
    if (::getppid() != parent) ::_exit(127);
  }
  // Signal dispositions set to "ignore" and the blocked mask survive exec: reset both.
  struct sigaction dfl;
  std::memset(&dfl, 0, sizeof(dfl));
  dfl.sa_handler = SIG_DFL;
  for (int sig = 1; sig < NSIG; ++sig) {
    if (sig != SIGKILL && sig != SIGSTOP) ::sigaction(sig, &dfl, nullptr);
  }
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);

  MoveFd(stdin_fd, STDIN_FILENO);
  if (stdout_fd >= 0) MoveFd(stdout_fd, STDOUT_FILENO);
  if (stderr_fd >= 0) MoveFd(stderr_fd, STDERR_FILENO);
  ::execve(plan.argv[0], plan.argv.data(), plan.envp.data());
  int err = errno;
  ssize_t ignored = ::write(error_fd, &err, sizeof(err));
  (void)ignored;
  ::_exit(127);
}

}  // namespace

std::string DescribeWaitStatus(int wait_status) {
  if (WIFEXITED(wait_status)) return absl::StrCat("exited with status ", WEXITSTATUS(wait_status));
  if (WIFSIGNALED(wait_status)) {
    int sig = WTERMSIG(wait_status);
    const char* name = strsignal(sig);
    return absl::StrCat("killed by signal ", sig, " (", name != nullptr ? name : "?", ")");
  }
  return absl::StrCat("ended with wait status ", wait_status);
}

std::string ReadFileTail(const std::string& path, int max_lines) {
  constexpr std::streamoff kMaxBytes = 64 * 1024;
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) return "";
  std::streamoff size = in.tellg();
  std::streamoff start = std::max<std::streamoff>(0, size - kMaxBytes);
  in.seekg(start);
  std::string text(static_cast<size_t>(size - start), '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<size_t>(in.gcount()));
  while (!text.empty() && text.back() == '\n') text.pop_back();
  std::vector<absl::string_view> lines = absl::StrSplit(text, '\n');
  size_t first = lines.size() > static_cast<size_t>(max_lines) ? lines.size() - max_lines : 0;
  return absl::StrJoin(lines.begin() + first, lines.end(), "\n");
}

absl::StatusOr<std::unique_ptr<ChildProcess>> ChildProcess::Spawn(const ChildSpec& spec) {
  struct stat st;
  if (::stat(spec.binary.c_str(), &st) != 0) {
    return absl::NotFoundError(absl::StrCat("cannot execute ", spec.binary, ": ", strerror(errno)));
  }
  if (!S_ISREG(st.st_mode) || ::access(spec.binary.c_str(), X_OK) != 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot execute ", spec.binary, ": not an executable file"));
  }
  // Descriptors opened here are closed on every path out of this function (the child keeps
  // its dup2'ed copies).
  std::vector<int> to_close;
  auto close_all = [&to_close] {
    for (int fd : to_close) ::close(fd);
  };
  int stdin_fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (stdin_fd < 0) return absl::InternalError("cannot open /dev/null");
  to_close.push_back(stdin_fd);
  int stdout_fd = -1;
  int stderr_fd = -1;
  if (!spec.stdout_path.empty()) {
    absl::StatusOr<int> fd = OpenLog(spec.stdout_path);
    if (!fd.ok()) {
      close_all();
      return fd.status();
    }
    stdout_fd = *fd;
    stderr_fd = *fd;
    to_close.push_back(*fd);
  }
  if (!spec.stderr_path.empty()) {
    absl::StatusOr<int> fd = OpenLog(spec.stderr_path);
    if (!fd.ok()) {
      close_all();
      return fd.status();
    }
    stderr_fd = *fd;
    to_close.push_back(*fd);
  }
  int error_pipe[2];
  if (::pipe2(error_pipe, O_CLOEXEC) != 0) {
    close_all();
    return absl::InternalError(absl::StrCat("pipe2: ", strerror(errno)));
  }
  ExecPlan plan = MakeExecPlan(spec);
  pid_t parent = ::getpid();
  pid_t pid = ::fork();
  if (pid < 0) {
    int err = errno;
    ::close(error_pipe[0]);
    ::close(error_pipe[1]);
    close_all();
    return absl::InternalError(absl::StrCat("fork: ", strerror(err)));
  }
  if (pid == 0) {
    ExecChild(spec, plan, parent, stdin_fd, stdout_fd, stderr_fd, error_pipe[1]);
  }
  ::close(error_pipe[1]);
  close_all();
  // The pipe closes without data when exec succeeds; otherwise the child sends exec's errno.
  int exec_errno = 0;
  ssize_t n;
  do {
    n = ::read(error_pipe[0], &exec_errno, sizeof(exec_errno));
  } while (n < 0 && errno == EINTR);
  ::close(error_pipe[0]);
  if (n == static_cast<ssize_t>(sizeof(exec_errno))) {
    int status = 0;
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    return absl::InternalError(
        absl::StrCat("cannot execute ", spec.binary, ": ", strerror(exec_errno)));
  }
  return std::unique_ptr<ChildProcess>(new ChildProcess(spec, pid));
}

ChildProcess::~ChildProcess() {
  if (wait_status_.has_value()) return;
  ::kill(pid_, SIGKILL);
  int status = 0;
  while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
  }
}

bool ChildProcess::Running() {
  if (wait_status_.has_value()) return false;
  int status = 0;
  pid_t r = ::waitpid(pid_, &status, WNOHANG);
  if (r == pid_) {
    wait_status_ = status;
    return false;
  }
  if (r < 0 && errno == ECHILD) {  // reaped elsewhere: nothing left to wait for
    wait_status_ = 0;
    return false;
  }
  return true;
}

std::string ChildProcess::DescribeExit() const {
  return wait_status_.has_value() ? DescribeWaitStatus(*wait_status_) : "running";
}

bool ChildProcess::ExitedCleanly() const {
  return wait_status_.has_value() && WIFEXITED(*wait_status_) && WEXITSTATUS(*wait_status_) == 0;
}

void ChildProcess::Signal(int sig) {
  if (!wait_status_.has_value()) ::kill(pid_, sig);
}

bool ChildProcess::WaitFor(absl::Duration timeout) {
  absl::Time deadline = absl::Now() + timeout;
  while (Running()) {
    absl::Duration left = deadline - absl::Now();
    if (left <= absl::ZeroDuration()) return false;
    std::this_thread::sleep_for(absl::ToChronoMilliseconds(std::min(left, absl::Milliseconds(10))));
  }
  return true;
}

bool ChildProcess::Stop(absl::Duration grace) {
  if (!Running()) return true;
  Signal(SIGTERM);
  if (WaitFor(grace)) return true;
  Signal(SIGKILL);
  WaitFor(absl::InfiniteDuration());
  return false;
}

}  // namespace tandem
