// Writing a file so that readers never see half of it: a temporary file beside it, flushed and
// synced, then rename(2). Ready files and other hand-offs between processes use this.
#ifndef TANDEM_COMMON_UTIL_ATOMIC_FILE_H_
#define TANDEM_COMMON_UTIL_ATOMIC_FILE_H_

#include <string>

#include "absl/status/status.h"

namespace tandem {

// Writes `contents` to `path` via `path`.tmp.PID and rename(2).
absl::Status WriteFileAtomically(const std::string& path, const std::string& contents);

}  // namespace tandem

#endif  // TANDEM_COMMON_UTIL_ATOMIC_FILE_H_
