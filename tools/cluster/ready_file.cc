#include "tools/cluster/ready_file.h"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"

namespace tandem {

absl::StatusOr<ReadyInfo> ParseReadyFile(const std::string& text) {
  nlohmann::ordered_json json =
      nlohmann::ordered_json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (json.is_discarded() || !json.is_object()) {
    return absl::InvalidArgumentError("ready file is not a JSON object");
  }
  ReadyInfo info;
  auto grpc = json.find("grpc");
  if (grpc == json.end() || !grpc->is_string() || grpc->get<std::string>().empty()) {
    return absl::InvalidArgumentError("ready file has no \"grpc\" address");
  }
  info.grpc = grpc->get<std::string>();
  auto pid = json.find("pid");
  if (pid == json.end() || !pid->is_number_integer()) {
    return absl::InvalidArgumentError("ready file has no integer \"pid\"");
  }
  info.pid = pid->get<int64_t>();
  for (auto it = json.begin(); it != json.end(); ++it) {
    if (it.key() == "grpc" || it.key() == "pid") continue;
    info.extra.emplace_back(
        it.key(), it.value().is_string() ? it.value().get<std::string>() : it.value().dump());
  }
  return info;
}

absl::StatusOr<ReadyInfo> ReadReadyFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat(path, " does not exist yet"));
  std::stringstream text;
  text << in.rdbuf();
  absl::StatusOr<ReadyInfo> info = ParseReadyFile(text.str());
  if (!info.ok())
    return absl::InvalidArgumentError(absl::StrCat(path, ": ", info.status().message()));
  return info;
}

absl::StatusOr<ReadyInfo> WaitForReadyFile(const std::string& path, ChildProcess& child,
                                           absl::Duration timeout,
                                           const std::function<bool()>& should_stop) {
  absl::Time deadline = absl::Now() + timeout;
  absl::Status last = absl::NotFoundError(absl::StrCat(path, " does not exist yet"));
  while (true) {
    if (std::filesystem::exists(path)) {
      absl::StatusOr<ReadyInfo> info = ReadReadyFile(path);
      if (info.ok()) return info;
      last = info.status();
    }
    if (!child.Running()) {
      return absl::FailedPreconditionError(
          absl::StrCat("it ", child.DescribeExit(), " before writing its ready file"));
    }
    if (should_stop && should_stop()) return absl::CancelledError("interrupted");
    if (absl::Now() >= deadline) {
      return absl::DeadlineExceededError(absl::StrCat(
          "not ready after ", absl::FormatDuration(timeout), " (", last.message(), ")"));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

}  // namespace tandem
