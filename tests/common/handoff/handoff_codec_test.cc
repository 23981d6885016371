#include "common/handoff/handoff_codec.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <vector>

#include "common/handoff/kv_checksum.h"
#include "common/transport/local_transport.h"

namespace tandem {
namespace {

using ::testing::HasSubstr;

KvLayout Layout() {
  KvLayout l;
  l.dtype = DType::kBF16;
  l.num_layers = 4;
  l.num_kv_heads = 2;
  l.head_dim = 64;
  l.block_size = 16;
  l.num_blocks = 100;
  return l;
}

TEST(HandoffCodecTest, LayoutRoundTrips) {
  for (DType d : {DType::kF32, DType::kF16, DType::kBF16}) {
    KvLayout l = Layout();
    l.dtype = d;
    auto back = KvLayoutFromProto(KvLayoutToProto(l));
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_EQ(*back, l);
  }
  EXPECT_EQ(KvLayoutToProto(Layout()).dtype(), "bf16");
  KvLayout fp8 = Layout();
  fp8.dtype = DType::kFP8E4M3;
  fp8.scale_fingerprint = 0x0123456789abcdefull;
  const tandem::v1::KvLayoutDescriptor proto = KvLayoutToProto(fp8);
  EXPECT_EQ(proto.dtype(), "fp8_e4m3");
  EXPECT_EQ(proto.scale_fingerprint(), 0x0123456789abcdefull);
  auto back = KvLayoutFromProto(proto);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, fp8);
}

TEST(HandoffCodecTest, LayoutWantsAScaleFingerprintForFp8AndOnlyForIt) {
  KvLayout fp8 = Layout();
  fp8.dtype = DType::kFP8E4M3;
  fp8.scale_fingerprint = 0;
  EXPECT_THAT(std::string(KvLayoutFromProto(KvLayoutToProto(fp8)).status().message()),
              HasSubstr("scale_fingerprint"));
  KvLayout bf16 = Layout();
  bf16.scale_fingerprint = 5;
  EXPECT_THAT(std::string(KvLayoutFromProto(KvLayoutToProto(bf16)).status().message()),
              HasSubstr("scale_fingerprint"));
}

TEST(HandoffCodecTest, KvCacheDTypeFlagValues) {
  EXPECT_EQ(ParseKvCacheDType("auto"), KvCacheDType{});
  EXPECT_EQ(ParseKvCacheDType("auto")->Or(DType::kF32), DType::kF32);
  EXPECT_EQ(ParseKvCacheDType("f32")->Or(DType::kBF16), DType::kF32);
  EXPECT_EQ(ParseKvCacheDType("bf16")->Or(DType::kF32), DType::kBF16);
  EXPECT_EQ(ParseKvCacheDType("fp8_e4m3")->Or(DType::kF32), DType::kFP8E4M3);
  EXPECT_EQ(ParseKvCacheDType("fp8")->Or(DType::kF32), DType::kFP8E4M3);
  EXPECT_FALSE(ParseKvCacheDType("f16").has_value());
  EXPECT_FALSE(ParseKvCacheDType("int8").has_value());
  EXPECT_FALSE(ParseKvCacheDType("").has_value());
  for (DType d : {DType::kF32, DType::kF16, DType::kBF16, DType::kFP8E4M3}) {
    EXPECT_EQ(ParseKvDType(KvDTypeName(d)), d);
  }
}

TEST(HandoffCodecTest, LayoutRejectsUnknownDtypeAndEmptyDimensions) {
  auto p = KvLayoutToProto(Layout());
  p.set_dtype("int4");
  EXPECT_THAT(std::string(KvLayoutFromProto(p).status().message()), HasSubstr("int4"));
  p = KvLayoutToProto(Layout());
  p.set_head_dim(0);
  EXPECT_THAT(std::string(KvLayoutFromProto(p).status().message()), HasSubstr("head_dim"));
}

TEST(HandoffCodecTest, CompatibilityNamesTheMismatchingField) {
  KvLayout a = Layout();
  KvLayout b = Layout();
  b.num_blocks = 7;
  EXPECT_TRUE(CheckLayoutsCompatible(a, b).ok());
  struct Case {
    const char* field;
    void (*mutate)(KvLayout*);
  };
  const Case cases[] = {
      {"dtype", [](KvLayout* l) { l->dtype = DType::kF32; }},
      {"dtype",
       [](KvLayout* l) {
         l->dtype = DType::kFP8E4M3;
         l->scale_fingerprint = 9;
       }},
      {"scale_fingerprint", [](KvLayout* l) { l->scale_fingerprint = 9; }},
      {"num_layers", [](KvLayout* l) { l->num_layers = 5; }},
      {"num_kv_heads", [](KvLayout* l) { l->num_kv_heads = 8; }},
      {"head_dim", [](KvLayout* l) { l->head_dim = 128; }},
      {"block_size", [](KvLayout* l) { l->block_size = 32; }},
  };
  for (const Case& c : cases) {
    KvLayout m = Layout();
    c.mutate(&m);
    absl::Status s = CheckLayoutsCompatible(a, m);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(s.message()), HasSubstr(c.field));
  }
}

TEST(HandoffCodecTest, HandoffRoundTripsThroughTheWire) {
  LocalTransport transport;
  std::vector<char> pool(4096);
  ASSERT_TRUE(transport.RegisterPool(pool.data(), pool.size()).ok());
  KvReservation r;
  r.request_id = 42;
  r.block_ids = {5, 6, 7, 99};
  r.num_cached_tokens = 32;
  const KvSeal seal{.epoch = 12, .checksum_key = NewKvChecksumKey()};
  tandem::v1::KvHandoff h = MakeKvHandoff(r, transport, Layout(), 777, 1500, seal);
  std::string wire = h.SerializeAsString();
  tandem::v1::KvHandoff parsed;
  ASSERT_TRUE(parsed.ParseFromString(wire));
  auto t = KvWriteTargetFromHandoff(parsed, transport.name());
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->target.address, transport.address());
  EXPECT_EQ(t->target.remote_key, transport.pool_remote_key());
  EXPECT_EQ(t->target.remote_base, transport.pool_base());
  EXPECT_EQ(t->target.incarnation, 777u);
  EXPECT_EQ(t->decode_incarnation, 777u);
  EXPECT_EQ(t->decode_request_id, 42u);
  EXPECT_EQ(t->block_ids, r.block_ids);
  EXPECT_EQ(t->num_cached_tokens, 32);
  EXPECT_EQ(t->layout, Layout());
  EXPECT_EQ(t->epoch, 12u);
  EXPECT_EQ(t->checksum_key, seal.checksum_key);
  const absl::Time now = absl::Now();
  EXPECT_EQ(HandoffDeadline(parsed, now), now + absl::Milliseconds(1500));
}

TEST(HandoffCodecTest, HandoffValidation) {
  LocalTransport transport;
  std::vector<char> pool(4096);
  ASSERT_TRUE(transport.RegisterPool(pool.data(), pool.size()).ok());
  KvReservation r;
  r.request_id = 1;
  r.block_ids = {1, 2};
  auto h = MakeKvHandoff(r, transport, Layout(), 1, 1000, KvSeal{});

  EXPECT_EQ(KvWriteTargetFromHandoff(h, "ucx").status().code(),
            absl::StatusCode::kFailedPrecondition);
  auto bad = h;
  bad.set_block_ids(1, 100);  // the pool has 100 blocks
  EXPECT_THAT(std::string(KvWriteTargetFromHandoff(bad, "local").status().message()),
              HasSubstr("block_ids[1]"));
  bad = h;
  bad.set_num_cached_tokens(8);  // half a block
  EXPECT_THAT(std::string(KvWriteTargetFromHandoff(bad, "local").status().message()),
              HasSubstr("num_cached_tokens"));
  bad = h;
  bad.set_num_cached_tokens(48);  // more than the blocks given
  EXPECT_FALSE(KvWriteTargetFromHandoff(bad, "local").ok());
  bad = h;
  bad.set_checksum_key("too short");
  EXPECT_THAT(std::string(KvWriteTargetFromHandoff(bad, "local").status().message()),
              HasSubstr("checksum key"));
  bad = h;
  bad.clear_transport_address();
  EXPECT_FALSE(KvWriteTargetFromHandoff(bad, "local").ok());
  bad = h;
  bad.mutable_layout()->set_dtype("");
  EXPECT_FALSE(KvWriteTargetFromHandoff(bad, "local").ok());
}

TEST(HandoffCodecTest, CompletionRoundTrips) {
  KvWriteTarget t;
  t.decode_request_id = 9;
  t.decode_incarnation = 10;
  GenerationEvent e;
  e.token = 1234;
  e.logprob = -0.5f;
  e.top_logprobs = {{1234, -0.5f}, {7, -1.25f}};
  auto c = MakeKvCompletion(t, 11, absl::OkStatus(), &e, 3);
  auto parsed = ParseKvCompletion(c.SerializeAsString());
  ASSERT_TRUE(parsed.ok());
  EXPECT_TRUE(parsed->ok());
  EXPECT_EQ(parsed->request_id(), 9u);
  EXPECT_EQ(parsed->decode_incarnation(), 10u);
  EXPECT_EQ(parsed->prefill_incarnation(), 11u);
  ImportedPrefill p = ImportedPrefillFromCompletion(*parsed);
  EXPECT_EQ(p.request_id, 9u);
  EXPECT_EQ(p.first_token, 1234);
  EXPECT_FLOAT_EQ(p.logprob, -0.5f);
  EXPECT_EQ(p.top_logprobs, e.top_logprobs);
  EXPECT_EQ(p.rng_counter, 3u);

  auto failed = MakeKvCompletion(t, 11, absl::DeadlineExceededError("too slow"), nullptr, 0);
  EXPECT_FALSE(failed.ok());
  EXPECT_THAT(failed.error(), HasSubstr("too slow"));
  EXPECT_FALSE(failed.has_first_token());

  EXPECT_FALSE(ParseKvCompletion(std::string("\xff\xff\xff\xff", 4)).ok());
}

}  // namespace
}  // namespace tandem
