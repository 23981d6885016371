// The ready file a supervisor or test waits for: written once the router serves, atomically
// (a temporary file in the same directory, then rename), so readers never see half of it.
#ifndef TANDEM_ROUTER_READY_FILE_H_
#define TANDEM_ROUTER_READY_FILE_H_

#include <string>

#include "absl/status/status.h"

namespace tandem {

// Writes `contents` to `path` via `path`.tmp.PID and rename(2).
absl::Status WriteFileAtomically(const std::string& path, const std::string& contents);

// {"grpc": "<grpc_address>", "pid": <this process>}
std::string ReadyFileJson(const std::string& grpc_address);

}  // namespace tandem

#endif  // TANDEM_ROUTER_READY_FILE_H_
