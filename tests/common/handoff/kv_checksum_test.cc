#include "common/handoff/kv_checksum.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "common/handoff/kv_block_writer.h"
#include "common/transport/local_transport.h"
#include "tests/common/transport/transport_test_util.h"

namespace tandem {
namespace {

using ::testing::HasSubstr;

KvLayout Layout(int32_t num_blocks) {
  KvLayout l;
  l.dtype = DType::kBF16;
  l.num_layers = 3;
  l.num_kv_heads = 2;
  l.head_dim = 8;
  l.block_size = 4;
  l.num_blocks = num_blocks;
  return l;
}

std::span<const uint8_t> Bytes(const std::vector<char>& v) {
  return {reinterpret_cast<const uint8_t*>(v.data()), v.size()};
}

TEST(KvChecksumTest, KeysAreRandomAndOfTheFixedSize) {
  const std::string a = NewKvChecksumKey();
  EXPECT_EQ(a.size(), kKvChecksumKeyBytes);
  EXPECT_NE(a, NewKvChecksumKey());
  EXPECT_EQ(KvBlockHasher::Create("short", 1).status().code(), absl::StatusCode::kInvalidArgument);
}

// The checksum is a function of the block's bytes, the key and the epoch: the same inputs agree,
// another key or another epoch does not, and each of the block's 2 * layers slices counts.
TEST(KvChecksumTest, ChecksumDependsOnEveryBlockSliceTheKeyAndTheEpoch) {
  const KvLayout l = Layout(6);
  std::vector<char> pool(l.total_bytes());
  testing::FillRandom(pool.data(), pool.size(), 3);
  const std::string key = NewKvChecksumKey();
  auto h = KvBlockHasher::Create(key, 7);
  ASSERT_TRUE(h.ok());
  const uint64_t sum = *h->HashBlock(Bytes(pool), l, 2);
  EXPECT_EQ(*KvBlockHasher::Create(key, 7)->HashBlock(Bytes(pool), l, 2), sum);
  EXPECT_NE(*KvBlockHasher::Create(key, 8)->HashBlock(Bytes(pool), l, 2), sum);
  EXPECT_NE(*KvBlockHasher::Create(NewKvChecksumKey(), 7)->HashBlock(Bytes(pool), l, 2), sum);
  EXPECT_NE(*h->HashBlock(Bytes(pool), l, 3), sum);
  const size_t elem = 2;
  for (int layer = 0; layer < l.num_layers; ++layer) {
    for (int kv = 0; kv < 2; ++kv) {
      std::vector<char> changed = pool;
      changed[l.Offset(layer, kv, 2, 1, 3) * elem] ^= 1;
      EXPECT_NE(*h->HashBlock(Bytes(changed), l, 2), sum) << "layer " << layer << " kv " << kv;
      EXPECT_EQ(*h->HashBlock(Bytes(changed), l, 1), *h->HashBlock(Bytes(pool), l, 1));
    }
  }
  EXPECT_EQ(h->HashBlock(Bytes(pool), l, 6).status().code(), absl::StatusCode::kOutOfRange);
  std::vector<char> short_pool(pool.size() - 1);
  EXPECT_EQ(h->HashBlock(Bytes(short_pool), l, 0).status().code(), absl::StatusCode::kOutOfRange);
}

TEST(KvChecksumTest, VerifyNamesTheFirstBlockThatDiffers) {
  const KvLayout l = Layout(8);
  std::vector<char> pool(l.total_bytes());
  testing::FillRandom(pool.data(), pool.size(), 4);
  auto h = KvBlockHasher::Create(NewKvChecksumKey(), 1);
  const std::vector<int32_t> blocks = {5, 1, 6};
  auto sums = h->HashBlocks(Bytes(pool), l, blocks);
  ASSERT_TRUE(sums.ok());
  EXPECT_TRUE(VerifyKvBlocks(Bytes(pool), l, blocks, *h, *sums).ok());
  pool[l.Offset(2, 1, 6, 0, 0) * 2 + 5] ^= 0x10;  // block 6, layer 2, V
  absl::Status s = VerifyKvBlocks(Bytes(pool), l, blocks, *h, *sums);
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(s.message(), HasSubstr("KV block 6 (written block 2)"));
  sums->pop_back();
  EXPECT_EQ(VerifyKvBlocks(Bytes(pool), l, blocks, *h, *sums).code(), absl::StatusCode::kDataLoss);
}

// A KvBlockWriter whose handoff carries a key, over LocalTransport: the notice carries the epoch
// and one checksum per written block (cached blocks skipped), which verify against what landed in
// the owner's pool; with one byte flipped in flight, they do not.
class WriterChecksumTest : public ::testing::Test {
 protected:
  WriterChecksumTest() : local_(Layout(16)), remote_(Layout(32)) {
    local_pool_.resize(local_.total_bytes());
    testing::FillRandom(local_pool_.data(), local_pool_.size(), 9);
    remote_pool_.assign(remote_.total_bytes(), 0);
    EXPECT_TRUE(writer_.RegisterPool(local_pool_.data(), local_pool_.size()).ok());
    EXPECT_TRUE(owner_.RegisterPool(remote_pool_.data(), remote_pool_.size()).ok());
    owner_.SetNoticeHandler([this](std::string_view payload) {
      auto c = ParseKvCompletion(payload);
      absl::MutexLock lock(&mu_);
      if (c.ok()) notice_ = *c;
    });
  }

  KvWriteTarget Target() {
    KvWriteTarget t;
    t.target = KvTarget{owner_.address(), owner_.pool_remote_key(), owner_.pool_base(),
                        owner_.incarnation()};
    t.layout = remote_;
    t.block_ids = {20, 3, 4, 9, 30};
    t.num_cached_tokens = 4;  // the first block is cached: not written, not checksummed
    t.decode_request_id = 77;
    t.decode_incarnation = owner_.incarnation();
    t.epoch = 41;
    t.checksum_key = key_;
    return t;
  }

  // Runs one writer to its notice: local blocks 1, 2, 3, 7, 8 in two chunks.
  tandem::v1::KvCompletion Run(KvWriteTarget target) {
    KvBlockWriterOptions o;
    o.transport = &writer_;
    o.local_layout = local_;
    o.target = std::move(target);
    o.release_blocks = [](RequestId) {};
    o.on_finished = [](absl::StatusOr<KvWriteResult>) {};
    auto w = KvBlockWriter::Create(std::move(o));
    EXPECT_TRUE(w.ok()) << w.status();
    const std::vector<int32_t> local = {1, 2, 3, 7, 8};
    (*w)->OnBlocksReady(5, 0, std::span<const int32_t>(local).subspan(0, 2));
    (*w)->OnBlocksReady(5, 2, std::span<const int32_t>(local).subspan(2));
    GenerationEvent first;
    first.request_id = 5;
    first.token = 11;
    (*w)->OnPrefillDone(first, 1);
    absl::MutexLock lock(&mu_);
    auto noticed = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return notice_.has_value(); };
    EXPECT_TRUE(mu_.AwaitWithTimeout(absl::Condition(&noticed), absl::Seconds(10)));
    return notice_.value_or(tandem::v1::KvCompletion());
  }

  absl::Status VerifyLanded(const tandem::v1::KvCompletion& c) {
    auto h = KvBlockHasher::Create(key_, c.epoch());
    const std::vector<int32_t> written = {3, 4, 9, 30};
    const std::vector<uint64_t> sums(c.block_checksums().begin(), c.block_checksums().end());
    return VerifyKvBlocks(owner_.host_pool(), remote_, written, *h, sums);
  }

  const KvLayout local_;
  const KvLayout remote_;
  const std::string key_ = NewKvChecksumKey();
  std::vector<char> local_pool_;
  std::vector<char> remote_pool_;
  LocalTransport writer_;
  LocalTransport owner_;
  absl::Mutex mu_;
  std::optional<tandem::v1::KvCompletion> notice_ ABSL_GUARDED_BY(mu_);
};

TEST_F(WriterChecksumTest, NoticeCarriesEpochAndChecksumsThatMatchTheLandedKv) {
  const tandem::v1::KvCompletion c = Run(Target());
  ASSERT_TRUE(c.ok()) << c.error();
  EXPECT_EQ(c.epoch(), 41u);
  ASSERT_EQ(c.block_checksums_size(), 4);
  EXPECT_TRUE(VerifyLanded(c).ok()) << VerifyLanded(c);
}

TEST_F(WriterChecksumTest, AByteFlippedInFlightFailsVerification) {
  writer_.CorruptNextWrites(1);
  const tandem::v1::KvCompletion c = Run(Target());
  ASSERT_TRUE(c.ok()) << c.error();
  const absl::Status s = VerifyLanded(c);
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << s;
}

TEST_F(WriterChecksumTest, WithoutAKeyTheNoticeCarriesNoChecksums) {
  KvWriteTarget t = Target();
  t.checksum_key.clear();
  const tandem::v1::KvCompletion c = Run(t);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c.epoch(), 41u);
  EXPECT_EQ(c.block_checksums_size(), 0);
}

TEST_F(WriterChecksumTest, AKeyForAPoolNotOnTheHostIsRefusedAtCreate) {
  LocalTransport unregistered;  // no host pool to read
  KvBlockWriterOptions o;
  o.transport = &unregistered;
  o.local_layout = local_;
  o.target = Target();
  o.release_blocks = [](RequestId) {};
  o.on_finished = [](absl::StatusOr<KvWriteResult>) {};
  EXPECT_EQ(KvBlockWriter::Create(std::move(o)).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace tandem
