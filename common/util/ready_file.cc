#include "common/util/ready_file.h"

#include <unistd.h>

#include <cstdint>

#include "common/util/atomic_file.h"
#include "nlohmann/json.hpp"

namespace tandem {

std::string ReadyFileJson(const ReadyEndpoints& endpoints) {
  nlohmann::json j = nlohmann::json::object();
  if (!endpoints.grpc.empty()) j["grpc"] = endpoints.grpc;
  if (!endpoints.http.empty()) j["http"] = endpoints.http;
  if (!endpoints.metrics.empty()) j["metrics"] = endpoints.metrics;
  j["pid"] = static_cast<int64_t>(::getpid());
  return j.dump() + "\n";
}

absl::Status WriteReadyFile(const std::string& path, const ReadyEndpoints& endpoints) {
  return WriteFileAtomically(path, ReadyFileJson(endpoints));
}

}  // namespace tandem
