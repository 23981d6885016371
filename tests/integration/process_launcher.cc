#include "tests/integration/process_launcher.h"

#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gtest/gtest.h"
#include "tests/integration/test_dirs.h"

namespace tandem {
namespace {

std::string ReadWholeFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace

std::string BinaryPath(const std::string& name) {
  return absl::StrCat(TestBinaryDir(), "/bin/", name);
}

std::string MissingBinaries(const std::vector<std::string>& names) {
  std::vector<std::string> missing;
  for (const std::string& name : names) {
    if (::access(BinaryPath(name).c_str(), X_OK) != 0) missing.push_back(name);
  }
  if (missing.empty()) return "";
  return absl::StrCat("missing from ", TestBinaryDir(), "/bin: ", absl::StrJoin(missing, ", "),
                      " (build them: cmake --build ", TestBinaryDir(), " --target ",
                      absl::StrJoin(missing, " "), ")");
}

std::string MakeTestTempDir(const std::string& prefix) {
  std::string root = ::testing::TempDir();
  if (root.empty() || root.back() != '/') root += '/';
  std::string pattern = root + prefix + "XXXXXX";
  if (::mkdtemp(pattern.data()) == nullptr) {
    std::fprintf(stderr, "mkdtemp(%s) failed\n", pattern.c_str());
    std::abort();
  }
  return pattern;
}

bool ProcessAlive(pid_t pid) {
  if (::kill(pid, 0) != 0) return false;
  // A zombie still answers kill(0); /proc/PID/stat's third field says 'Z'.
  std::string stat = ReadWholeFile(absl::StrCat("/proc/", pid, "/stat"));
  size_t paren = stat.rfind(')');
  if (paren == std::string::npos || paren + 2 >= stat.size()) return !stat.empty();
  return stat[paren + 2] != 'Z' && stat[paren + 2] != 'X';
}

std::vector<pid_t> WaitForProcessesGone(const std::vector<pid_t>& pids, absl::Duration timeout) {
  absl::Time deadline = absl::Now() + timeout;
  while (true) {
    std::vector<pid_t> alive;
    for (pid_t pid : pids) {
      if (ProcessAlive(pid)) alive.push_back(pid);
    }
    if (alive.empty() || absl::Now() >= deadline) return alive;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

absl::StatusOr<std::unique_ptr<LaunchedProcess>> LaunchedProcess::Start(
    const std::string& binary, std::vector<std::string> args, Options options) {
  std::unique_ptr<LaunchedProcess> p(new LaunchedProcess());
  std::string name = std::filesystem::path(binary).filename().string();
  p->work_dir_ = MakeTestTempDir(absl::StrCat("tandem_", name, "_"));
  p->log_path_ = p->work_dir_ + "/process.log";
  p->ready_file_ = p->work_dir_ + "/ready.json";
  if (options.add_ready_file_flag) {
    args.push_back("--ready-file");
    args.push_back(p->ready_file_);
  }
  ChildSpec spec;
  spec.binary = binary;
  spec.args = std::move(args);
  spec.env = std::move(options.env);
  spec.stdout_path = p->log_path_;
  spec.die_with_parent = options.die_with_parent;
  spec.own_process_group = true;
  absl::StatusOr<std::unique_ptr<ChildProcess>> child = ChildProcess::Spawn(spec);
  if (!child.ok()) {
    std::error_code ec;
    std::filesystem::remove_all(p->work_dir_, ec);
    return child.status();
  }
  p->child_ = *std::move(child);
  return p;
}

LaunchedProcess::~LaunchedProcess() {
  child_.reset();  // SIGKILL + reap if still running
  const char* keep = std::getenv("TANDEM_KEEP_TEST_DIRS");
  if (keep != nullptr && std::string(keep) == "1") {
    std::fprintf(stderr, "keeping %s\n", work_dir_.c_str());
    return;
  }
  std::error_code ec;
  std::filesystem::remove_all(work_dir_, ec);
}

absl::StatusOr<std::string> LaunchedProcess::WaitReady(absl::Duration timeout) {
  absl::StatusOr<ReadyInfo> ready = WaitForReadyFile(ready_file_, *child_, timeout);
  if (!ready.ok()) {
    return absl::Status(ready.status().code(),
                        absl::StrCat(child_->spec().binary, " (pid ", pid(), ") not ready: ",
                                     ready.status().message(), "\n--- last lines of ", log_path_,
                                     " ---\n", LogTail(), "\n---"));
  }
  ready_ = *std::move(ready);
  return ready_.grpc;
}

std::string LaunchedProcess::ReadyFileText() const { return ReadWholeFile(ready_file_); }

std::string LaunchedProcess::Log() const { return ReadWholeFile(log_path_); }

std::string LaunchedProcess::LogTail(int lines) const { return ReadFileTail(log_path_, lines); }

void LaunchedProcess::Kill() { child_->Signal(SIGKILL); }

std::optional<int> LaunchedProcess::WaitExit(absl::Duration timeout) {
  if (!child_->WaitFor(timeout)) return std::nullopt;
  return child_->wait_status();
}

CommandResult RunCommand(const std::string& binary, const std::vector<std::string>& args,
                         const EnvVars& env, absl::Duration timeout) {
  CommandResult result;
  std::string dir = MakeTestTempDir("tandem_cmd_");
  ChildSpec spec;
  spec.binary = binary;
  spec.args = args;
  spec.env = env;
  spec.stdout_path = dir + "/stdout";
  spec.stderr_path = dir + "/stderr";
  absl::StatusOr<std::unique_ptr<ChildProcess>> child = ChildProcess::Spawn(spec);
  if (!child.ok()) {
    result.stderr_text = std::string(child.status().message());
  } else {
    if (!(*child)->WaitFor(timeout)) {
      result.timed_out = true;
      (*child)->Stop(absl::ZeroDuration());
    }
    int status = (*child)->wait_status().value_or(-1);
    if (!result.timed_out && WIFEXITED(status)) result.exit_code = WEXITSTATUS(status);
    result.stdout_text = ReadWholeFile(spec.stdout_path);
    result.stderr_text = ReadWholeFile(spec.stderr_path);
    if (result.timed_out) {
      absl::StrAppend(&result.stderr_text, "\n[killed after ", absl::FormatDuration(timeout), "]");
    }
  }
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  return result;
}

}  // namespace tandem
