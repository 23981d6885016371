#include "common/transport/kv_transport.h"

#include <cstring>
#include <random>
#include <string>

#include "absl/strings/str_cat.h"

namespace tandem {

absl::StatusOr<void*> KvTransport::AllocatePool(size_t bytes) {
  if (bytes == 0) return absl::InvalidArgumentError("empty pool");
  if (owned_pool_ != nullptr) return absl::FailedPreconditionError("pool already allocated");
  constexpr size_t kPage = 4096;
  const size_t rounded = (bytes + kPage - 1) / kPage * kPage;
  void* p = std::aligned_alloc(kPage, rounded);
  if (p == nullptr) {
    return absl::ResourceExhaustedError(absl::StrCat("cannot allocate a ", bytes, "-byte pool"));
  }
  std::memset(p, 0, rounded);
  absl::Status s = RegisterPool(p, bytes);
  if (!s.ok()) {
    std::free(p);
    return s;
  }
  owned_pool_.reset(p);
  return p;
}

absl::Status KvTransport::RegisterDevicePool(void* base, size_t bytes, int cuda_device) {
  return absl::UnimplementedError(
      absl::StrCat("the ", std::string(name()), " KV transport cannot move CUDA device memory"));
}

uint64_t RandomIncarnation() {
  std::random_device rd;
  uint64_t v = 0;
  while (v == 0) v = (uint64_t{rd()} << 32) ^ rd();
  return v;
}

}  // namespace tandem
