#include "common/handoff/kv_checksum.h"

#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <random>

#include "absl/strings/str_cat.h"
#include "common/types/dtype.h"
#include "spdlog/spdlog.h"
#define XXH_STATIC_LINKING_ONLY  // XXH3_state_t on the stack
#include "xxhash.h"

namespace tandem {

std::string NewKvChecksumKey() {
  std::string key(kKvChecksumKeyBytes, '\0');
  if (RAND_bytes(reinterpret_cast<unsigned char*>(key.data()), static_cast<int>(key.size())) != 1) {
    // OpenSSL's generator failed to seed (it should not on Linux): the OS device instead.
    std::random_device rd;
    for (char& c : key) c = static_cast<char>(rd());
  }
  return key;
}

absl::StatusOr<KvBlockHasher> KvBlockHasher::Create(std::string_view key, uint64_t epoch) {
  if (key.size() != kKvChecksumKeyBytes) {
    return absl::InvalidArgumentError(absl::StrCat("a KV checksum key has ", kKvChecksumKeyBytes,
                                                   " bytes, this one ", key.size()));
  }
  static_assert(kSecretBytes >= XXH3_SECRET_SIZE_MIN && kSecretBytes % 32 == 0);
  KvBlockHasher hasher;
  constexpr std::string_view kDomain = "tandem.kv-checksum/1";
  for (size_t i = 0; i < kSecretBytes / 32; ++i) {
    std::string message(kDomain);
    for (int b = 0; b < 8; ++b) message.push_back(static_cast<char>((epoch >> (8 * b)) & 0xff));
    message.push_back(static_cast<char>(i));
    unsigned int len = 0;
    HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
         reinterpret_cast<const unsigned char*>(message.data()), message.size(),
         hasher.secret_.data() + 32 * i, &len);
  }
  return hasher;
}

absl::StatusOr<uint64_t> KvBlockHasher::HashBlock(std::span<const uint8_t> pool,
                                                  const KvLayout& layout, int32_t block) const {
  const uint64_t elem = DTypeSize(layout.dtype);
  if (static_cast<uint64_t>(layout.total_elements()) * elem > pool.size()) {
    return absl::OutOfRangeError(absl::StrCat("KV checksum: the layout needs ",
                                              layout.total_elements() * elem,
                                              " bytes, the pool has ", pool.size()));
  }
  if (block < 0 || block >= layout.num_blocks) {
    return absl::OutOfRangeError(absl::StrCat("KV checksum: block ", block, " is outside the ",
                                              layout.num_blocks, "-block pool"));
  }
  XXH3_state_t state;
  XXH3_INITSTATE(&state);
  XXH3_64bits_reset_withSecret(&state, secret_.data(), secret_.size());
  const uint64_t slice = static_cast<uint64_t>(layout.block_stride()) * elem;
  for (int layer = 0; layer < layout.num_layers; ++layer) {
    for (int kv = 0; kv < 2; ++kv) {
      const uint64_t offset = static_cast<uint64_t>(layout.Offset(layer, kv, block, 0, 0)) * elem;
      XXH3_64bits_update(&state, pool.data() + offset, slice);
    }
  }
  return XXH3_64bits_digest(&state);
}

absl::StatusOr<std::vector<uint64_t>> KvBlockHasher::HashBlocks(
    std::span<const uint8_t> pool, const KvLayout& layout, std::span<const int32_t> blocks) const {
  std::vector<uint64_t> sums;
  sums.reserve(blocks.size());
  for (int32_t block : blocks) {
    absl::StatusOr<uint64_t> sum = HashBlock(pool, layout, block);
    if (!sum.ok()) return sum.status();
    sums.push_back(*sum);
  }
  return sums;
}

absl::Status VerifyKvBlocks(std::span<const uint8_t> pool, const KvLayout& layout,
                            std::span<const int32_t> block_ids, const KvBlockHasher& hasher,
                            std::span<const uint64_t> expected) {
  if (block_ids.size() != expected.size()) {
    return absl::DataLossError(absl::StrCat("the completion carries ", expected.size(),
                                            " block checksums for ", block_ids.size(),
                                            " written blocks"));
  }
  for (size_t i = 0; i < block_ids.size(); ++i) {
    absl::StatusOr<uint64_t> sum = hasher.HashBlock(pool, layout, block_ids[i]);
    if (!sum.ok()) return sum.status();
    if (*sum != expected[i]) {
      return absl::DataLossError(absl::StrCat("KV block ", block_ids[i], " (written block ", i,
                                              ") does not match the writer's checksum"));
    }
  }
  return absl::OkStatus();
}

bool TakeTestStaleKvEpoch() {
  static std::atomic<int64_t> remaining = [] {
    const char* v = std::getenv("TANDEM_TEST_STALE_KV_EPOCH");
    const int64_t n = v == nullptr ? 0 : std::strtoll(v, nullptr, 10);
    if (n > 0) {
      spdlog::warn("TANDEM_TEST_STALE_KV_EPOCH={}: test hook, completions carry a stale epoch", n);
    }
    return n;
  }();
  int64_t n = remaining.load();
  while (n > 0) {
    if (remaining.compare_exchange_weak(n, n - 1)) return true;
  }
  return false;
}

}  // namespace tandem
