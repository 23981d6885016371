// The ready file a supervisor, tandem-cluster or a test waits for: written once a process serves,
// atomically, as {"grpc": "HOST:PORT", "http": "HOST:PORT", "metrics": "HOST:PORT", "pid": N}
// (fields a process does not serve are left out). tools/cluster/ready_file.h reads it.
#ifndef TANDEM_COMMON_UTIL_READY_FILE_H_
#define TANDEM_COMMON_UTIL_READY_FILE_H_

#include <string>

#include "absl/status/status.h"

namespace tandem {

struct ReadyEndpoints {
  std::string grpc;     // gRPC API (nodes: the node service; router: Generation)
  std::string http;     // the router's OpenAI-compatible HTTP API
  std::string metrics;  // Prometheus /metrics
};

// The file's JSON text, with this process's pid.
std::string ReadyFileJson(const ReadyEndpoints& endpoints);
absl::Status WriteReadyFile(const std::string& path, const ReadyEndpoints& endpoints);

}  // namespace tandem

#endif  // TANDEM_COMMON_UTIL_READY_FILE_H_
