#include "tools/cluster/cluster_runner.h"

#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "tools/cli/generate_client.h"
#include "tools/cluster/cluster_plan.h"
#include "tools/cluster/local_cluster.h"
#include "tools/cluster/ready_file.h"

namespace tandem {
namespace {

constexpr absl::Duration kPollInterval = absl::Milliseconds(100);

void Error(const std::string& message) {
  std::fprintf(stderr, "tandem-cluster: %s\n", message.c_str());
  std::fflush(stderr);
}

std::string TempRoot() {
  const char* tmp = std::getenv("TMPDIR");
  return tmp != nullptr && tmp[0] != '\0' ? tmp : "/tmp";
}

// A fresh private directory `<TMPDIR>/<prefix>XXXXXX`.
std::optional<std::string> MakeTempDir(const std::string& prefix) {
  std::string pattern = TempRoot() + "/" + prefix + "XXXXXX";
  if (::mkdtemp(pattern.data()) == nullptr) return std::nullopt;
  return pattern;
}

// The folder of the running executable, where the server binaries are built beside it.
std::string ExecutableDir() {
  std::error_code ec;
  std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? "." : exe.parent_path().string();
}

// Removes the ready-file directory on every path out of RunCluster, and the log directory it
// made itself when nothing was logged there.
struct RemoveDirsOnExit {
  std::string ready_dir;
  std::string own_log_dir;
  ~RemoveDirsOnExit() {
    std::error_code ec;
    if (!ready_dir.empty()) std::filesystem::remove_all(ready_dir, ec);
    if (!own_log_dir.empty() && std::filesystem::is_empty(own_log_dir, ec)) {
      std::filesystem::remove(own_log_dir, ec);
    }
  }
};

void Stop(LocalCluster& cluster, const ClusterOptions& options) {
  for (const std::string& line : cluster.Stop(absl::Milliseconds(options.stop_grace_ms))) {
    Error(line);
  }
}

// Streams one completion of options.prompt through the router to stdout while watching for
// signals and dead members. Returns the exit code.
int RunPrompt(LocalCluster& cluster, const ClusterOptions& options, SignalWatcher& signals) {
  // Closed before the stop, so the router sees no open connection while it drains.
  auto client = std::make_unique<GenerateClient>(cluster.router_address(), cluster.tls_ca());
  v1::GenerateRequest request;
  request.set_text(*options.prompt);
  request.mutable_sampling()->set_max_tokens(options.max_tokens);
  if (options.temperature.has_value()) {
    request.mutable_sampling()->set_temperature(*options.temperature);
  }
  std::atomic<bool> done{false};
  absl::Status status;
  std::thread worker([&] {
    status = client->WaitForConnected(absl::Seconds(30));
    if (status.ok()) {
      status = client->Generate(request, [](const v1::GenerateResponse& response) {
        std::fwrite(response.text().data(), 1, response.text().size(), stdout);
        std::fflush(stdout);
      });
    }
    done = true;
  });
  std::optional<std::string> died;
  bool interrupted = false;
  while (!done) {
    if (!interrupted && signals.Wait(kPollInterval)) {
      interrupted = true;
      client->Cancel();
    }
    if (!died.has_value() && (died = cluster.CheckExited()).has_value()) client->Cancel();
    if (interrupted || died.has_value()) break;
  }
  worker.join();
  client.reset();
  std::fputc('\n', stdout);
  std::fflush(stdout);
  if (died.has_value()) {
    Error(absl::StrCat(*died, "\nstopping the cluster"));
  } else if (interrupted) {
    Error(absl::StrCat("received ", strsignal(signals.stop_signal()),
                       " before the completion finished; stopping the cluster"));
  } else if (!status.ok()) {
    Error(absl::StrCat("Generate failed: ", absl::StatusCodeToString(status.code()), ": ",
                       status.message()));
  }
  Stop(cluster, options);
  return status.ok() && !died.has_value() && !interrupted ? 0 : 1;
}

// Serves until SIGINT/SIGTERM (exit 0) or until a member dies (exit 1).
int Serve(LocalCluster& cluster, const ClusterOptions& options, SignalWatcher& signals) {
  while (true) {
    if (signals.Wait(kPollInterval)) {
      Error(absl::StrCat("received ", strsignal(signals.stop_signal()), "; stopping the cluster"));
      Stop(cluster, options);
      Error("stopped");
      return 0;
    }
    if (std::optional<std::string> died = cluster.CheckExited()) {
      Error(absl::StrCat(*died, "\nstopping the cluster"));
      Stop(cluster, options);
      return 1;
    }
  }
}

}  // namespace

absl::Status WriteClusterSecret(const std::string& path) {
  std::ifstream random("/dev/urandom", std::ios::binary);
  unsigned char bytes[32];
  if (!random.read(reinterpret_cast<char*>(bytes), sizeof(bytes))) {
    return absl::UnavailableError("cannot read /dev/urandom for the cluster secret");
  }
  std::string hex;
  for (unsigned char b : bytes) absl::StrAppend(&hex, absl::Hex(b, absl::kZeroPad2));
  const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL, 0600);
  if (fd < 0 || write(fd, hex.data(), hex.size()) != static_cast<ssize_t>(hex.size())) {
    if (fd >= 0) close(fd);
    return absl::UnavailableError(absl::StrCat("cannot write the cluster secret ", path));
  }
  close(fd);
  return absl::OkStatus();
}

int RunCluster(const ClusterOptions& options, SignalWatcher& signals) {
  std::error_code ec;
  if (!std::filesystem::is_directory(options.model_dir, ec)) {
    Error(absl::StrCat("--model: ", options.model_dir, " is not a directory"));
    return 2;
  }
  ClusterDirs dirs;
  RemoveDirsOnExit cleanup;
  dirs.bin_dir = options.bin_dir.empty() ? ExecutableDir() : options.bin_dir;
  if (!std::filesystem::is_directory(dirs.bin_dir, ec)) {
    Error(absl::StrCat("--bin-dir: ", dirs.bin_dir, " is not a directory"));
    return 2;
  }
  if (options.log_dir.empty()) {
    std::optional<std::string> dir = MakeTempDir("tandem-cluster-logs-");
    if (!dir.has_value()) {
      Error(absl::StrCat("cannot create a log directory in ", TempRoot(), ": ", strerror(errno)));
      return 2;
    }
    dirs.log_dir = *dir;
    cleanup.own_log_dir = *dir;
  } else {
    dirs.log_dir = options.log_dir;
    std::filesystem::create_directories(dirs.log_dir, ec);
    if (!std::filesystem::is_directory(dirs.log_dir)) {
      Error(absl::StrCat("--log-dir: cannot create ", dirs.log_dir));
      return 2;
    }
  }
  std::optional<std::string> ready_dir = MakeTempDir("tandem-cluster-ready-");
  if (!ready_dir.has_value()) {
    Error(absl::StrCat("cannot create a temp directory in ", TempRoot(), ": ", strerror(errno)));
    return 2;
  }
  cleanup.ready_dir = *ready_dir;
  dirs.ready_dir = *ready_dir;
  // A fresh secret per cluster run: the nodes authenticate KV handoffs with it.
  dirs.secret_file = absl::StrCat(*ready_dir, "/cluster-secret");
  if (absl::Status s = WriteClusterSecret(dirs.secret_file); !s.ok()) {
    Error(std::string(s.message()));
    return 2;
  }
  if (options.tls) {
    absl::StatusOr<TlsMaterial> tls = MakeTlsMaterial(*ready_dir);
    if (!tls.ok()) {
      Error(absl::StrCat("--tls: ", tls.status().message()));
      return 2;
    }
    dirs.tls = *std::move(tls);
  }

  // With --prompt, stdout carries only the completion.
  FILE* info = options.prompt.has_value() ? stderr : stdout;
  std::fprintf(info,
               "tandem-cluster: starting %d prefill + %d decode nodes and a router (%s); "
               "logs in %s\n",
               NumPrefillNodes(options), options.num_decode, options.mode.c_str(),
               dirs.log_dir.c_str());
  std::fflush(info);

  LocalCluster cluster(options, dirs);
  absl::Status started = cluster.Start([&signals] { return signals.StopRequested(); });
  if (!started.ok()) {
    if (started.code() == absl::StatusCode::kCancelled) {
      Error(absl::StrCat("received ", strsignal(signals.stop_signal()),
                         " while starting; stopping the cluster"));
      Stop(cluster, options);
      return options.prompt.has_value() ? 1 : 0;
    }
    Error(std::string(started.message()));
    Stop(cluster, options);
    return 1;
  }
  std::fputs(cluster.DescribeEndpoints().c_str(), info);
  std::fflush(info);
  if (!options.ready_file.empty()) {
    absl::Status written = WriteFileAtomically(options.ready_file, cluster.EndpointsJson());
    if (!written.ok()) {
      Error(std::string(written.message()));
      Stop(cluster, options);
      return 1;
    }
  }
  if (options.prompt.has_value()) return RunPrompt(cluster, options, signals);
  return Serve(cluster, options, signals);
}

}  // namespace tandem
