// Ready files: a server writes {"grpc": "HOST:PORT", "pid": N, ...} atomically (write, then
// rename) once it serves; a launcher waits for the file to learn the port the server picked.
#ifndef TANDEM_TOOLS_CLUSTER_READY_FILE_H_
#define TANDEM_TOOLS_CLUSTER_READY_FILE_H_

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/util/atomic_file.h"
#include "tools/cluster/child_process.h"

namespace tandem {

struct ReadyInfo {
  std::string grpc;  // "HOST:PORT" the process serves gRPC on
  int64_t pid = 0;
  // Any other top-level fields (e.g. "http", "metrics"), values as text, in file order.
  std::vector<std::pair<std::string, std::string>> extra;
};

// Parses a ready file's text. InvalidArgument when it is not a JSON object with a non-empty
// "grpc" string and an integer "pid".
absl::StatusOr<ReadyInfo> ParseReadyFile(const std::string& text);

// Reads and parses `path`; NotFound while it does not exist.
absl::StatusOr<ReadyInfo> ReadReadyFile(const std::string& path);

// Waits until `path` holds a valid ready file. Fails with FailedPrecondition when `child` exits
// first, DeadlineExceeded after `timeout`, Cancelled when `should_stop` (polled; may be empty)
// returns true. Messages name the path; callers add the child's log tail.
absl::StatusOr<ReadyInfo> WaitForReadyFile(const std::string& path, ChildProcess& child,
                                           absl::Duration timeout,
                                           const std::function<bool()>& should_stop = {});

}  // namespace tandem

#endif  // TANDEM_TOOLS_CLUSTER_READY_FILE_H_
