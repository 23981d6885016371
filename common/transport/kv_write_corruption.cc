#include "common/transport/kv_write_corruption.h"

#include <cstdlib>

#include "spdlog/spdlog.h"

namespace tandem {

int64_t KvWriteCorruption::FromEnvironment() {
  const char* v = std::getenv("TANDEM_TEST_CORRUPT_KV_WRITES");
  if (v == nullptr) return 0;
  const int64_t n = std::strtoll(v, nullptr, 10);
  if (n > 0) {
    spdlog::warn("TANDEM_TEST_CORRUPT_KV_WRITES={}: test hook, KV writes will be corrupted", n);
  }
  return n > 0 ? n : 0;
}

std::optional<KvByteFlip> KvWriteCorruption::Take(const std::vector<KvCopy>& copies) {
  size_t copy = 0;
  while (copy < copies.size() && copies[copy].bytes == 0) ++copy;
  if (copy == copies.size()) return std::nullopt;
  int64_t n = remaining_.load();
  while (n > 0) {
    if (remaining_.compare_exchange_weak(n, n - 1)) {
      return KvByteFlip{copy, copies[copy].bytes / 2};
    }
  }
  return std::nullopt;
}

}  // namespace tandem
