// CudaKvTransport end to end with host memory standing in for device memory (HostMemoryCopier):
// the direct (same-host, exported pool) path and the staged path (staging buffers, landing slots,
// grants) over a LocalTransport and over real UCX on loopback tcp, in one process.
#include "common/transport/cuda/cuda_kv_transport.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/time/clock.h"
#include "common/transport/cuda/device_pool_descriptor.h"
#include "common/transport/cuda/host_memory_copier.h"
#include "common/transport/cuda/staged_messages.h"
#include "common/transport/local_transport.h"
#include "common/transport/ucx_transport.h"
#include "tests/common/transport/cuda/cuda_transport_test_util.h"
#include "tests/common/transport/transport_test_util.h"

// UCX 1.13 keeps a few small allocations of its transport lists until exit; they are not ours.
extern "C" const char* __lsan_default_suppressions() {
  return "leak:libuct.so\nleak:libucs.so\nleak:libucp.so\n";
}

namespace tandem {
namespace {

using testing::FillRandom;
using testing::Fnv1a;
using testing::Inbox;
using testing::Result;
using testing::TargetOf;

std::unique_ptr<KvTransport> MakeInner(const std::string& kind) {
  if (kind == "local") return std::make_unique<LocalTransport>();
  UcxTransportOptions o;
  o.tls = "tcp";
  absl::StatusOr<std::unique_ptr<UcxTransport>> t = UcxTransport::Create(o);
  EXPECT_TRUE(t.ok()) << t.status();
  if (!t.ok()) return nullptr;
  return std::move(*t);
}

// One side: a CudaKvTransport with its pool (a SharedHostPool when others may open it). The pool
// is declared first so that it outlives the transport, whose destructor finishes queued copies.
struct Node {
  std::unique_ptr<SharedHostPool> shared;
  std::vector<char> plain;
  char* pool = nullptr;
  size_t bytes = 0;
  std::unique_ptr<CudaKvTransport> transport;
  HostMemoryCopier* copier = nullptr;  // owned by the transport

  explicit operator bool() const { return transport != nullptr; }
  KvTarget target() const { return TargetOf(*transport); }
};

Node MakeNode(const std::string& inner, size_t bytes, bool shareable, CudaKvTransportOptions o,
              HostMemoryCopierOptions copier_options = {}) {
  Node n;
  auto copier = std::make_unique<HostMemoryCopier>(copier_options);
  n.copier = copier.get();
  std::unique_ptr<KvTransport> in = MakeInner(inner);
  if (in == nullptr) return n;
  absl::StatusOr<std::unique_ptr<CudaKvTransport>> t =
      CudaKvTransport::Create(std::move(in), std::move(copier), o);
  EXPECT_TRUE(t.ok()) << t.status();
  if (!t.ok()) return n;
  if (shareable) {
    absl::StatusOr<std::unique_ptr<SharedHostPool>> p = SharedHostPool::Create(bytes);
    EXPECT_TRUE(p.ok()) << p.status();
    if (!p.ok()) return n;
    n.shared = std::move(*p);
    n.pool = n.shared->data();
  } else {
    n.plain.assign(bytes, 0);
    n.pool = n.plain.data();
  }
  n.bytes = bytes;
  absl::Status s = (*t)->RegisterDevicePool(n.pool, bytes, 0);
  EXPECT_TRUE(s.ok()) << s;
  if (!s.ok()) return n;
  n.transport = std::move(*t);
  return n;
}

struct Param {
  std::string inner;  // "local" or "ucx"
  bool direct;        // the owner's pool can be opened (same-host direct path) or not (staged)
};

class CudaKvTransportTest : public ::testing::TestWithParam<Param> {
 protected:
  // Small chunks and few buffers and slots, so even small writes cycle through all of them.
  static CudaKvTransportOptions Options() {
    CudaKvTransportOptions o;
    o.chunk_bytes = 64 << 10;
    o.staging_buffers = 3;
    o.landing_slots = 4;
    o.max_slots_per_transfer = 2;
    return o;
  }
  Node Owner(size_t bytes, CudaKvTransportOptions o = Options(), HostMemoryCopierOptions c = {}) {
    return MakeNode(GetParam().inner, bytes, GetParam().direct, o, c);
  }
  Node Writer(size_t bytes, CudaKvTransportOptions o = Options(), HostMemoryCopierOptions c = {}) {
    Node n = MakeNode(GetParam().inner, bytes, false, o, c);
    if (n) FillRandom(n.pool, bytes, 42);
    return n;
  }
  void ExpectPath(const Node& writer, const Node& owner) {
    const CudaKvTransportStats w = writer.transport->stats();
    const CudaKvTransportStats o = owner.transport->stats();
    if (GetParam().direct) {
      EXPECT_GT(w.direct_writes, 0);
      EXPECT_EQ(w.staged_writes, 0);
      EXPECT_EQ(w.imports_opened, 1);
      EXPECT_EQ(o.chunks_received, 0);
    } else {
      EXPECT_EQ(w.direct_writes, 0);
      EXPECT_GT(w.staged_writes, 0);
      EXPECT_EQ(w.imports_opened, 0);
      EXPECT_GT(w.chunks_sent, 0);
      EXPECT_EQ(o.chunks_received, w.chunks_sent);
    }
  }
};

// Random scattered copies (many chunks' worth, crossing chunk ends) in several writes in flight
// at once; the notice sent right behind them finds every byte in place.
TEST_P(CudaKvTransportTest, ManyCopiesLandByteExactBeforeTheNotice) {
  constexpr size_t kPool = 4 << 20;
  Node owner = Owner(kPool);
  Node writer = Writer(kPool);
  ASSERT_TRUE(owner && writer);
  EXPECT_EQ(owner.transport->name(), "cuda");
  std::mt19937_64 rng(7);
  constexpr size_t kSlot = 16 << 10;
  std::vector<size_t> slots(kPool / kSlot);
  for (size_t i = 0; i < slots.size(); ++i) slots[i] = i;
  std::shuffle(slots.begin(), slots.end(), rng);
  std::vector<char> expected(kPool, 0);
  std::vector<KvCopy> copies;
  for (size_t i = 0; i < slots.size(); ++i) {
    KvCopy c;
    c.bytes = 1 + rng() % kSlot;
    c.src_offset = rng() % (kPool - c.bytes);
    c.dst_offset = slots[i] * kSlot;
    std::memcpy(expected.data() + c.dst_offset, writer.pool + c.src_offset, c.bytes);
    copies.push_back(c);
  }
  uint64_t hash_at_notice = 0;
  Inbox inbox;
  owner.transport->SetNoticeHandler(
      inbox.Handler([&](std::string_view) { hash_at_notice = Fnv1a(owner.pool, kPool); }));
  std::vector<std::unique_ptr<Result>> writes;
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  for (size_t start = 0; start < copies.size(); start += 40) {
    std::vector<KvCopy> part(copies.begin() + start,
                             copies.begin() + std::min(copies.size(), start + 40));
    writes.push_back(std::make_unique<Result>());
    writer.transport->Write(owner.target(), std::move(part), deadline, writes.back()->Callback());
  }
  Result notice;
  writer.transport->Notify(owner.target(), "all-written", deadline, notice.Callback());
  for (auto& w : writes) {
    ASSERT_TRUE(w->Wait(absl::Seconds(40)));
    EXPECT_TRUE(w->status().ok()) << w->status();
  }
  ASSERT_TRUE(notice.Wait(absl::Seconds(40)));
  EXPECT_TRUE(notice.status().ok()) << notice.status();
  ASSERT_TRUE(inbox.WaitFor(1, absl::Seconds(10)));
  EXPECT_EQ(inbox.payloads()[0], "all-written");
  EXPECT_EQ(hash_at_notice, Fnv1a(expected.data(), kPool)) << "the notice overtook a write";
  EXPECT_EQ(std::memcmp(owner.pool, expected.data(), kPool), 0);
  for (auto& w : writes) EXPECT_EQ(w->calls(), 1);
  EXPECT_EQ(notice.calls(), 1);
  ExpectPath(writer, owner);
  EXPECT_EQ(owner.transport->stats().notices_delivered, 1);
}

// Copies that take a while (on both sides): done and the notice still wait for them.
TEST_P(CudaKvTransportTest, SlowCopiesStillLandBeforeDoneAndTheNotice) {
  constexpr size_t kPool = 1 << 20;
  const HostMemoryCopierOptions slow{.copy_latency = absl::Milliseconds(20)};
  Node owner = Owner(kPool, Options(), slow);
  Node writer = Writer(kPool, Options(), slow);
  ASSERT_TRUE(owner && writer);
  uint64_t hash_at_notice = 0;
  Inbox inbox;
  owner.transport->SetNoticeHandler(
      inbox.Handler([&](std::string_view) { hash_at_notice = Fnv1a(owner.pool, kPool); }));
  // The whole pool, reversed in 64 KiB blocks, as one write.
  std::vector<KvCopy> copies;
  std::vector<char> expected(kPool);
  constexpr size_t kBlock = 64 << 10;
  for (size_t b = 0; b < kPool / kBlock; ++b) {
    KvCopy c{b * kBlock, kPool - (b + 1) * kBlock, kBlock};
    std::memcpy(expected.data() + c.dst_offset, writer.pool + c.src_offset, kBlock);
    copies.push_back(c);
  }
  Result write, notice;
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  writer.transport->Write(owner.target(), copies, deadline, write.Callback());
  writer.transport->Notify(owner.target(), "n", deadline, notice.Callback());
  ASSERT_TRUE(write.Wait(absl::Seconds(40)));
  ASSERT_TRUE(write.status().ok()) << write.status();
  // `done` means the bytes are in the owner's pool.
  EXPECT_EQ(std::memcmp(owner.pool, expected.data(), kPool), 0);
  ASSERT_TRUE(notice.Wait(absl::Seconds(40)));
  EXPECT_TRUE(notice.status().ok()) << notice.status();
  ASSERT_TRUE(inbox.WaitFor(1, absl::Seconds(10)));
  EXPECT_EQ(hash_at_notice, Fnv1a(expected.data(), kPool));
  ExpectPath(writer, owner);
}

TEST_P(CudaKvTransportTest, BadRequestsFailWithTheReason) {
  constexpr size_t kPool = 1 << 16;
  Node owner = Owner(kPool);
  Node writer = Writer(kPool * 2);
  ASSERT_TRUE(owner && writer);
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  Result src_out, dst_out, bad_key, empty;
  writer.transport->Write(owner.target(), {{kPool * 2 - 10, 0, 11}}, deadline, src_out.Callback());
  writer.transport->Write(owner.target(), {{0, kPool - 10, 11}}, deadline, dst_out.Callback());
  KvTarget wrong = owner.target();
  wrong.remote_key = "not a descriptor";
  writer.transport->Write(wrong, {{0, 0, 16}}, deadline, bad_key.Callback());
  writer.transport->Write(owner.target(), {}, deadline, empty.Callback());
  for (Result* r : {&src_out, &dst_out, &bad_key, &empty}) ASSERT_TRUE(r->Wait(absl::Seconds(10)));
  EXPECT_EQ(src_out.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(src_out.status().message().find("source"), std::string::npos) << src_out.status();
  EXPECT_EQ(dst_out.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(dst_out.status().message().find("destination"), std::string::npos);
  EXPECT_EQ(bad_key.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(empty.status().ok()) << empty.status();

  // A pool registers once; RegisterPool is not this transport's.
  EXPECT_EQ(owner.transport->RegisterDevicePool(owner.pool, kPool, 0).code(),
            absl::StatusCode::kFailedPrecondition);
  std::vector<char> host(64);
  EXPECT_EQ(owner.transport->RegisterPool(host.data(), host.size()).code(),
            absl::StatusCode::kUnimplemented);
}

TEST_P(CudaKvTransportTest, WriteBeforeRegisteringFails) {
  auto t = CudaKvTransport::Create(MakeInner(GetParam().inner),
                                   std::make_unique<HostMemoryCopier>(), Options());
  ASSERT_TRUE(t.ok());
  Node owner = Owner(1 << 16);
  ASSERT_TRUE(owner);
  Result r;
  (*t)->Write(owner.target(), {{0, 0, 16}}, absl::Now() + absl::Seconds(5), r.Callback());
  ASSERT_TRUE(r.Wait(absl::Seconds(10)));
  EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition);
}

// Copies that outlast the deadline: done says so at the deadline, not when they end.
TEST_P(CudaKvTransportTest, DeadlinePassingWhileCopyingFails) {
  constexpr size_t kPool = 1 << 18;
  Node owner = Owner(kPool);
  Node writer = Writer(kPool, Options(), {.copy_latency = absl::Seconds(3)});
  ASSERT_TRUE(owner && writer);
  const absl::Time start = absl::Now();
  Result w, n;
  writer.transport->Write(owner.target(), {{0, 0, kPool}}, start + absl::Milliseconds(200),
                          w.Callback());
  writer.transport->Notify(owner.target(), "late", start + absl::Milliseconds(200), n.Callback());
  ASSERT_TRUE(w.Wait(absl::Seconds(5)));
  EXPECT_EQ(w.status().code(), absl::StatusCode::kDeadlineExceeded) << w.status();
  EXPECT_LT(w.at() - start, absl::Milliseconds(1500));
  ASSERT_TRUE(n.Wait(absl::Seconds(5)));
  EXPECT_FALSE(n.status().ok());
  EXPECT_EQ(w.calls(), 1);
}

// A failed device copy fails its write; the transport keeps working afterwards.
TEST_P(CudaKvTransportTest, CopyErrorFailsTheWriteOnly) {
  constexpr size_t kPool = 1 << 18;
  Node owner = Owner(kPool);
  Node writer = Writer(kPool);
  ASSERT_TRUE(owner && writer);
  const absl::Time deadline = absl::Now() + absl::Seconds(20);
  writer.copier->InjectCopyError(absl::DataLossError("uncorrectable ECC error"));
  Result bad;
  writer.transport->Write(owner.target(), {{0, 0, kPool}}, deadline, bad.Callback());
  ASSERT_TRUE(bad.Wait(absl::Seconds(30)));
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kDataLoss) << bad.status();
  writer.copier->InjectCopyError(absl::OkStatus());
  Result good;
  writer.transport->Write(owner.target(), {{0, 0, kPool}}, deadline, good.Callback());
  ASSERT_TRUE(good.Wait(absl::Seconds(30)));
  EXPECT_TRUE(good.status().ok()) << good.status();
  EXPECT_EQ(std::memcmp(owner.pool, writer.pool, kPool), 0);
}

// The transport is destroyed with operations in flight: each `done` runs once, Cancelled.
TEST_P(CudaKvTransportTest, DestroyingFailsPendingOperationsOnce) {
  constexpr size_t kPool = 1 << 18;
  Node owner = Owner(kPool);
  Node writer = Writer(kPool, Options(), {.copy_latency = absl::Seconds(2)});
  ASSERT_TRUE(owner && writer);
  std::vector<std::unique_ptr<Result>> results;
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  for (int i = 0; i < 4; ++i) {
    results.push_back(std::make_unique<Result>());
    writer.transport->Write(owner.target(), {{0, 0, kPool}}, deadline, results.back()->Callback());
  }
  results.push_back(std::make_unique<Result>());
  writer.transport->Notify(owner.target(), "x", deadline, results.back()->Callback());
  absl::SleepFor(absl::Milliseconds(50));
  writer.transport.reset();
  for (auto& r : results) {
    ASSERT_TRUE(r->Wait(absl::Seconds(5)));
    EXPECT_EQ(r->calls(), 1);
    EXPECT_FALSE(r->status().ok());
  }
}

INSTANTIATE_TEST_SUITE_P(Paths, CudaKvTransportTest,
                         ::testing::Values(Param{"local", true}, Param{"local", false},
                                           Param{"ucx", true}, Param{"ucx", false}),
                         [](const ::testing::TestParamInfo<Param>& info) {
                           return info.param.inner + (info.param.direct ? "_direct" : "_staged");
                         });

// ---- the staged path only ----

CudaKvTransportOptions StagedOptions() {
  CudaKvTransportOptions o;
  o.chunk_bytes = 32 << 10;
  o.staging_buffers = 2;
  o.landing_slots = 2;
  o.max_slots_per_transfer = 1;
  o.allow_direct = false;
  return o;
}

// Three writers share an owner with two landing slots: every byte of each arrives.
TEST(CudaKvTransportStagedTest, SeveralWritersShareFewLandingSlots) {
  constexpr size_t kPool = 3 << 20;
  constexpr size_t kPart = kPool / 3;
  Node owner = MakeNode("ucx", kPool, false, StagedOptions());
  ASSERT_TRUE(owner);
  std::vector<Node> writers;
  for (int i = 0; i < 3; ++i) {
    writers.push_back(MakeNode("ucx", kPart, false, StagedOptions()));
    ASSERT_TRUE(writers.back());
    FillRandom(writers.back().pool, kPart, 100 + i);
  }
  Inbox inbox;
  owner.transport->SetNoticeHandler(inbox.Handler());
  std::vector<std::unique_ptr<Result>> results;
  const absl::Time deadline = absl::Now() + absl::Seconds(60);
  for (int i = 0; i < 3; ++i) {
    // Two writes each, halves in swapped order.
    for (uint64_t half : {uint64_t{1}, uint64_t{0}}) {
      results.push_back(std::make_unique<Result>());
      writers[i].transport->Write(owner.target(),
                                  {{half * kPart / 2, i * kPart + half * kPart / 2, kPart / 2}},
                                  deadline, results.back()->Callback());
    }
    results.push_back(std::make_unique<Result>());
    writers[i].transport->Notify(owner.target(), "w" + std::to_string(i), deadline,
                                 results.back()->Callback());
  }
  for (auto& r : results) {
    ASSERT_TRUE(r->Wait(absl::Seconds(70)));
    EXPECT_TRUE(r->status().ok()) << r->status();
  }
  ASSERT_TRUE(inbox.WaitFor(3, absl::Seconds(10)));
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(std::memcmp(owner.pool + i * kPart, writers[i].pool, kPart), 0) << "writer " << i;
  }
  int64_t sent = 0;
  for (const Node& w : writers) sent += w.transport->stats().chunks_sent;
  EXPECT_EQ(sent, static_cast<int64_t>(kPool / (32 << 10)));
  EXPECT_EQ(owner.transport->stats().chunks_received, sent);
}

// The owner fails to copy a landing slot into its pool: the writer's write fails, saying so.
TEST(CudaKvTransportStagedTest, OwnerCopyErrorFailsTheWrite) {
  constexpr size_t kPool = 1 << 18;
  Node owner = MakeNode("local", kPool, false, StagedOptions());
  Node writer = MakeNode("local", kPool, false, StagedOptions());
  ASSERT_TRUE(owner && writer);
  owner.copier->InjectCopyError(absl::InternalError("device lost"));
  Result r;
  writer.transport->Write(owner.target(), {{0, 0, kPool}}, absl::Now() + absl::Seconds(20),
                          r.Callback());
  ASSERT_TRUE(r.Wait(absl::Seconds(30)));
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInternal);
  EXPECT_NE(r.status().message().find("owner refused a chunk"), std::string::npos) << r.status();
  EXPECT_NE(r.status().message().find("device lost"), std::string::npos) << r.status();
}

// The owner is gone: writes and notices end with an error, not a hang.
TEST(CudaKvTransportStagedTest, GoneOwnerFailsWritesWithinTheDeadline) {
  constexpr size_t kPool = 1 << 18;
  Node owner = MakeNode("ucx", kPool, false, StagedOptions());
  Node writer = MakeNode("ucx", kPool, false, StagedOptions());
  ASSERT_TRUE(owner && writer);
  const KvTarget target = owner.target();
  owner.transport.reset();
  const absl::Time start = absl::Now();
  Result w, n;
  writer.transport->Write(target, {{0, 0, kPool}}, start + absl::Seconds(3), w.Callback());
  writer.transport->Notify(target, "x", start + absl::Seconds(3), n.Callback());
  ASSERT_TRUE(w.Wait(absl::Seconds(10)));
  ASSERT_TRUE(n.Wait(absl::Seconds(10)));
  EXPECT_FALSE(w.status().ok());
  EXPECT_FALSE(n.status().ok());
  EXPECT_LT(w.at() - start, absl::Seconds(5));
}

// A writer that asked for slots and vanished: the owner takes its slots back after the
// transfer's deadline plus the grace, and a chunk under a stale grant is refused.
TEST(CudaKvTransportStagedTest, OwnerTakesBackSlotsOfAVanishedWriter) {
  constexpr size_t kPool = 1 << 18;
  CudaKvTransportOptions o = StagedOptions();
  o.landing_slots = 1;
  o.grant_grace = absl::Milliseconds(100);
  Node owner = MakeNode("local", kPool, false, o);
  ASSERT_TRUE(owner);
  absl::StatusOr<DevicePoolDescriptor> d =
      DecodeDevicePoolDescriptor(owner.transport->pool_remote_key());
  ASSERT_TRUE(d.ok());
  // The ghost speaks the protocol through a bare inner transport.
  LocalTransport ghost;
  Inbox ghost_inbox;
  ghost.SetNoticeHandler(ghost_inbox.Handler());
  KvTarget landing{owner.transport->address(), d->inner_remote_key, d->landing_base, 0};
  StagedMessage request;
  request.type = StagedMessageType::kRequest;
  request.writer_id = 99;
  request.reply_address = ghost.address();
  request.transfer = 1;
  request.chunks = 1;
  request.time_left_ms = 100;
  Result sent;
  ghost.Notify(landing, EncodeStagedMessage(request), absl::Now() + absl::Seconds(5),
               sent.Callback());
  ASSERT_TRUE(ghost_inbox.WaitFor(1, absl::Seconds(5)));
  absl::StatusOr<StagedMessage> grant = DecodeStagedMessage(ghost_inbox.payloads()[0]);
  ASSERT_TRUE(grant.ok());
  ASSERT_EQ(grant->type, StagedMessageType::kGrant);
  ASSERT_EQ(grant->grants.size(), 1u);

  // A real writer now waits for the only slot, which comes back ~200 ms later.
  Node writer = MakeNode("local", kPool, false, o);
  ASSERT_TRUE(writer);
  FillRandom(writer.pool, kPool, 3);
  const absl::Time start = absl::Now();
  Result w;
  writer.transport->Write(owner.target(), {{0, 0, 64 << 10}}, start + absl::Seconds(10),
                          w.Callback());
  ASSERT_TRUE(w.Wait(absl::Seconds(15)));
  EXPECT_TRUE(w.status().ok()) << w.status();
  EXPECT_GE(owner.transport->stats().grants_reclaimed, 1);
  EXPECT_EQ(std::memcmp(owner.pool, writer.pool, 64 << 10), 0);

  // The ghost's late chunk under its old grant is refused.
  StagedMessage chunk;
  chunk.type = StagedMessageType::kChunk;
  chunk.writer_id = 99;
  chunk.reply_address = ghost.address();
  chunk.transfer = 1;
  chunk.grants = grant->grants;
  chunk.segments = {{0, 16}};
  ghost.Notify(landing, EncodeStagedMessage(chunk), absl::Now() + absl::Seconds(5),
               sent.Callback());
  ASSERT_TRUE(ghost_inbox.WaitFor(2, absl::Seconds(5)));
  absl::StatusOr<StagedMessage> refusal = DecodeStagedMessage(ghost_inbox.payloads()[1]);
  ASSERT_TRUE(refusal.ok());
  EXPECT_EQ(refusal->type, StagedMessageType::kChunkDone);
  EXPECT_EQ(refusal->status.code(), absl::StatusCode::kFailedPrecondition) << refusal->status;
  EXPECT_EQ(std::memcmp(owner.pool, writer.pool, 64 << 10), 0) << "a refused chunk was copied";
}

// ---- path choice ----

// Same host, but the export handle cannot be opened here: the writer falls back to staged.
TEST(CudaKvTransportPathTest, UnopenableHandleFallsBackToStaged) {
  constexpr size_t kPool = 1 << 18;
  CudaKvTransportOptions o = StagedOptions();
  o.allow_direct = true;
  Node owner = MakeNode("local", kPool, true, o);
  Node writer = MakeNode("local", kPool, false, o);
  ASSERT_TRUE(owner && writer);
  FillRandom(writer.pool, kPool, 8);
  absl::StatusOr<DevicePoolDescriptor> d =
      DecodeDevicePoolDescriptor(owner.transport->pool_remote_key());
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->host_id, HostIdentity());
  EXPECT_EQ(d->export_handle.rfind("memfd:", 0), 0u) << d->export_handle;
  d->export_handle = "memfd:1:999999";  // not ours to open
  KvTarget target = owner.target();
  target.remote_key = EncodeDevicePoolDescriptor(*d);
  Result r;
  writer.transport->Write(target, {{0, 0, kPool}}, absl::Now() + absl::Seconds(20), r.Callback());
  ASSERT_TRUE(r.Wait(absl::Seconds(30)));
  EXPECT_TRUE(r.status().ok()) << r.status();
  EXPECT_EQ(std::memcmp(owner.pool, writer.pool, kPool), 0);
  const CudaKvTransportStats s = writer.transport->stats();
  EXPECT_EQ(s.import_failures, 1);
  EXPECT_EQ(s.staged_writes, 1);
  EXPECT_EQ(s.direct_writes, 0);
}

// Another host: never direct, even with a handle.
TEST(CudaKvTransportPathTest, OtherHostIsStaged) {
  constexpr size_t kPool = 1 << 16;
  CudaKvTransportOptions o = StagedOptions();
  o.allow_direct = true;
  Node owner = MakeNode("local", kPool, true, o);
  Node writer = MakeNode("local", kPool, false, o);
  ASSERT_TRUE(owner && writer);
  absl::StatusOr<DevicePoolDescriptor> d =
      DecodeDevicePoolDescriptor(owner.transport->pool_remote_key());
  ASSERT_TRUE(d.ok());
  d->host_id = "boot:another-machine";
  KvTarget target = owner.target();
  target.remote_key = EncodeDevicePoolDescriptor(*d);
  Result r;
  writer.transport->Write(target, {{0, 0, kPool}}, absl::Now() + absl::Seconds(20), r.Callback());
  ASSERT_TRUE(r.Wait(absl::Seconds(30)));
  EXPECT_TRUE(r.status().ok()) << r.status();
  EXPECT_EQ(writer.transport->stats().staged_writes, 1);
  EXPECT_EQ(writer.transport->stats().imports_opened, 0);
}

// An opened pool unused for import_idle_close is closed, and reopened on the next write.
TEST(CudaKvTransportPathTest, IdlePoolsAreClosedAndReopened) {
  constexpr size_t kPool = 1 << 16;
  CudaKvTransportOptions o = StagedOptions();
  o.allow_direct = true;
  o.import_idle_close = absl::Milliseconds(100);
  Node owner = MakeNode("local", kPool, true, o);
  Node writer = MakeNode("local", kPool, false, o);
  ASSERT_TRUE(owner && writer);
  for (int round = 0; round < 2; ++round) {
    Result r;
    writer.transport->Write(owner.target(), {{0, 0, kPool}}, absl::Now() + absl::Seconds(10),
                            r.Callback());
    ASSERT_TRUE(r.Wait(absl::Seconds(15)));
    EXPECT_TRUE(r.status().ok()) << r.status();
    absl::SleepFor(absl::Milliseconds(400));
  }
  const CudaKvTransportStats s = writer.transport->stats();
  EXPECT_EQ(s.imports_opened, 2);
  EXPECT_EQ(s.imports_closed, 2);
  EXPECT_EQ(s.direct_writes, 2);
}

}  // namespace
}  // namespace tandem
