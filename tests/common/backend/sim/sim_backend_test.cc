#include "common/backend/sim/sim_backend.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "common/backend/sim/sim_model_presets.h"
#include "common/util/clock.h"
#include "gtest/gtest.h"

namespace tandem {
namespace {

ModelConfig Llama8b() {
  auto c = SimModelPreset("llama-3.1-8b");
  EXPECT_TRUE(c.ok()) << c.status();
  return *c;
}

struct Recorded {
  std::vector<absl::Duration> waits;
};

SimBackendOptions SmallPool(Recorded* rec, int kv_scale = 4) {
  SimBackendOptions o;
  o.num_kv_blocks = 64;
  o.kv_scale = kv_scale;
  o.wait = [rec](absl::Duration d) { rec->waits.push_back(d); };
  return o;
}

TEST(SimBackendTest, PoolHasTheBlocksTheGpuMemoryHolds) {
  SimBackendOptions o;
  o.kv_scale = 128;  // the pool keeps 1 of each head's 128 elements
  auto b = SimBackend::Create(Llama8b(), o);
  ASSERT_TRUE(b.ok()) << b.status();
  const KvLayout& layout = (*b)->kv_layout();
  // (0.9 * 81559 MiB - 2 GiB - 16,060,522,496 B of weights) / (16 tokens * 128 KiB)
  const double kv = 0.9 * 81559.0 * 1048576.0 - 2147483648.0 - 16060522496.0;
  EXPECT_EQ(layout.num_blocks, static_cast<int>(kv / (16 * 131072.0)));
  EXPECT_EQ(layout.head_dim, 1);
  EXPECT_EQ(layout.dtype, DType::kBF16);
  EXPECT_EQ((*b)->real_kv_bytes_per_token(), 131072);
  EXPECT_EQ(layout.bytes_per_token(), 131072u / 128);
  EXPECT_EQ((*b)->pool_bytes(), layout.total_bytes());
}

TEST(SimBackendTest, KvDTypeSetsBlocksStepTimeAndPoolBytes) {
  // What a GPU's memory holds, and a decode step at a 4k context, per KV dtype: fp8 holds twice
  // bf16's blocks, reads half its KV bytes per step, and its pool (what transfers move) is half.
  std::vector<int> blocks;
  std::vector<double> step_s;
  std::vector<size_t> pool_bytes_per_token;
  for (DType dtype : {DType::kF32, DType::kBF16, DType::kFP8E4M3}) {
    SimBackendOptions o;
    o.kv_scale = 128;
    o.kv_dtype = dtype;
    auto b = SimBackend::Create(Llama8b(), o);
    ASSERT_TRUE(b.ok()) << b.status();
    const KvLayout& layout = (*b)->kv_layout();
    EXPECT_EQ(layout.dtype, dtype);
    EXPECT_EQ((*b)->real_kv_bytes_per_token(), 65536 * static_cast<int64_t>(DTypeSize(dtype)));
    EXPECT_EQ(layout.scale_fingerprint != 0, dtype == DType::kFP8E4M3);
    blocks.push_back(layout.num_blocks);
    pool_bytes_per_token.push_back(layout.bytes_per_token());
    const std::vector<SimStepItem> decode(32, SimStepItem{1, 4095, true});
    step_s.push_back((*b)->time_model().Time(decode).total_s());
  }
  const double kv = 0.9 * 81559.0 * 1048576.0 - 2147483648.0 - 16060522496.0;
  EXPECT_EQ(blocks[0], static_cast<int>(kv / (16 * 262144.0)));
  EXPECT_EQ(blocks[1], static_cast<int>(kv / (16 * 131072.0)));
  EXPECT_EQ(blocks[2], static_cast<int>(kv / (16 * 65536.0)));
  EXPECT_EQ(pool_bytes_per_token, (std::vector<size_t>{2048, 1024, 512}));
  EXPECT_GT(step_s[0], step_s[1]);
  EXPECT_GT(step_s[1], step_s[2]);
  // The KV part of a decode step (32 x 4k tokens: 16 GiB in bf16) dominates: fp8 saves most of
  // half of it.
  EXPECT_LT(step_s[2], 0.75 * step_s[1]);
}

TEST(SimBackendTest, WritesTheKvPatternInEachDType) {
  for (DType dtype : {DType::kF32, DType::kFP8E4M3}) {
    Recorded rec;
    SimBackendOptions o = SmallPool(&rec, /*kv_scale=*/32);
    o.kv_dtype = dtype;
    auto made = SimBackend::Create(Llama8b(), o);
    ASSERT_TRUE(made.ok()) << made.status();
    SimBackend& b = **made;
    const KvLayout& layout = b.kv_layout();
    std::vector<TokenId> prompt = {5, 6, 7};
    std::vector<int32_t> table = {9};
    ForwardItem prefill{prompt, 0, table, true};
    std::vector<DeviceSampling> rows(1);
    std::vector<TokenId> next(1);
    ASSERT_TRUE(b.ForwardAndSample(ForwardBatch{{&prefill, 1}}, rows, next).ok());
    const uint8_t* pool = static_cast<const uint8_t*>(b.kv_pool());
    const size_t elem = DTypeSize(dtype);
    for (int pos = 0; pos < 3; ++pos) {
      const uint16_t word = SimBackend::KvPatternWord(prompt[pos], pos, 3, 1, 2);
      const uint8_t* row = pool + layout.Offset(3, 1, 9, 2, pos) * elem;
      for (int d = 0; d < layout.head_dim; ++d) {
        if (elem == 1) {
          EXPECT_EQ(row[d], static_cast<uint8_t>(word));
        } else {
          uint16_t lo, hi;
          std::memcpy(&lo, row + d * elem, 2);
          std::memcpy(&hi, row + d * elem + 2, 2);
          EXPECT_EQ(lo, word);
          EXPECT_EQ(hi, word);
        }
      }
    }
  }
}

TEST(SimBackendTest, StepTakesTheModelledTime) {
  Recorded rec;
  auto b = SimBackend::Create(Llama8b(), SmallPool(&rec));
  ASSERT_TRUE(b.ok()) << b.status();
  std::vector<TokenId> prompt = {10, 11, 12, 13, 14};
  std::vector<int32_t> table = {3};
  ForwardItem item{prompt, 0, table, true};
  std::vector<DeviceSampling> rows(1);
  std::vector<TokenId> out(1);
  const absl::Time before = absl::Now();
  ASSERT_TRUE((*b)->ForwardAndSample(ForwardBatch{{&item, 1}}, rows, out).ok());
  const absl::Duration call = absl::Now() - before;
  std::vector<SimStepItem> expected_items = {{5, 0, true}};
  const double modelled = (*b)->time_model().Time(expected_items).total_s();
  SimBackendStats stats = (*b)->stats();
  EXPECT_EQ(stats.steps, 1);
  EXPECT_DOUBLE_EQ(stats.last_step.total_s(), modelled);
  EXPECT_DOUBLE_EQ(stats.modelled_busy_s, modelled);
  // The backend waited out what was left of the modelled time after its own work.
  ASSERT_EQ(rec.waits.size(), 1u);
  EXPECT_LE(rec.waits[0], absl::Seconds(modelled));
  EXPECT_GE(rec.waits[0], absl::Seconds(modelled) - call);
}

// In virtual time the step waits exactly the modelled time: a manual clock does not move while
// the backend computes, and a wait that advances it ends the step at start + modelled.
TEST(SimBackendTest, OnAManualClockAStepWaitsExactlyTheModelledTime) {
  ManualClock clock;
  SimBackendOptions o;
  o.num_kv_blocks = 64;
  o.kv_scale = 4;
  o.clock = &clock;
  std::vector<absl::Duration> waits;
  o.wait = [&](absl::Duration d) {
    waits.push_back(d);
    clock.AdvanceNanos(absl::ToInt64Nanoseconds(d));
  };
  auto b = SimBackend::Create(Llama8b(), o);
  ASSERT_TRUE(b.ok()) << b.status();
  std::vector<TokenId> prompt = {10, 11, 12, 13, 14};
  std::vector<int32_t> table = {3};
  ForwardItem item{prompt, 0, table, true};
  std::vector<DeviceSampling> rows(1);
  std::vector<TokenId> out(1);
  const absl::Time start = clock.Now();
  ASSERT_TRUE((*b)->ForwardAndSample(ForwardBatch{{&item, 1}}, rows, out).ok());
  std::vector<SimStepItem> expected_items = {{5, 0, true}};
  const double modelled = (*b)->time_model().Time(expected_items).total_s();
  ASSERT_EQ(waits.size(), 1u);
  EXPECT_EQ(waits[0], absl::Nanoseconds(absl::ToInt64Nanoseconds(absl::Seconds(modelled))));
  EXPECT_EQ(clock.Now() - start, waits[0]);
}

TEST(SimBackendTest, TimeScaleStretchesTheWait) {
  Recorded rec;
  SimBackendOptions o = SmallPool(&rec);
  o.time_scale = 1000;  // 5.8 ms modelled → 5.8 s real (recorded, not slept)
  auto b = SimBackend::Create(Llama8b(), o);
  ASSERT_TRUE(b.ok()) << b.status();
  std::vector<TokenId> tok = {7};
  std::vector<int32_t> table = {0};
  ForwardItem item{tok, 0, table, true};
  std::vector<float> logits(128256);
  ASSERT_TRUE((*b)->Forward(ForwardBatch{{&item, 1}}, LogitsOutput{logits}).ok());
  const double modelled = (*b)->stats().last_step.total_s();
  ASSERT_EQ(rec.waits.size(), 1u);
  EXPECT_GT(rec.waits[0], absl::Seconds(modelled * 1000) - absl::Seconds(1));
  EXPECT_LE(rec.waits[0], absl::Seconds(modelled * 1000));
}

TEST(SimBackendTest, TokensAreAFunctionOfTheContextAndNeverSpecial) {
  Recorded rec;
  auto a = SimBackend::Create(Llama8b(), SmallPool(&rec));
  auto b = SimBackend::Create(Llama8b(), SmallPool(&rec));
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ((*a)->token_limit(), 128000);  // BOS 128000 and the EOS ids lie above
  std::vector<TokenId> p1 = {1, 2, 3}, p2 = {9, 9, 9, 9, 9, 9, 9, 3};
  std::vector<int32_t> t1 = {0}, t2 = {1};
  ForwardItem items[] = {{p1, 0, t1, true}, {p2, 0, t2, true}};
  std::vector<DeviceSampling> rows(2);
  std::vector<TokenId> ta(2), tb(2);
  ASSERT_TRUE((*a)->ForwardAndSample(ForwardBatch{items}, rows, ta).ok());
  ASSERT_TRUE(
      (*b)->ForwardAndSample(ForwardBatch{{&items[1], 1}}, {&rows[0], 1}, {&tb[0], 1}).ok());
  EXPECT_EQ(ta[0], SimBackend::NextToken(3, 3, 128000));
  EXPECT_EQ(ta[1], SimBackend::NextToken(3, 8, 128000));
  EXPECT_EQ(tb[0], ta[1]);  // same context, another node, another batch: same token
  EXPECT_NE(ta[0], ta[1]);  // the position matters
  // Many draws stay below the limit and spread over it.
  int high = 0;
  for (int i = 0; i < 10000; ++i) {
    TokenId t = SimBackend::NextToken(i % 500, i, 128000);
    ASSERT_GE(t, 0);
    ASSERT_LT(t, 128000);
    high += t >= 64000;
  }
  EXPECT_GT(high, 4500);
  EXPECT_LT(high, 5500);
}

TEST(SimBackendTest, LogitsPathPicksTheSameToken) {
  Recorded rec;
  auto b = SimBackend::Create(Llama8b(), SmallPool(&rec));
  ASSERT_TRUE(b.ok());
  std::vector<TokenId> p = {5, 6};
  std::vector<int32_t> table = {2};
  ForwardItem item{p, 0, table, true};
  std::vector<float> logits(128256, -1.0f);
  ASSERT_TRUE((*b)->Forward(ForwardBatch{{&item, 1}}, LogitsOutput{logits}).ok());
  auto best = std::max_element(logits.begin(), logits.end()) - logits.begin();
  EXPECT_EQ(best, SimBackend::NextToken(6, 2, 128000));
  EXPECT_EQ(std::count(logits.begin(), logits.end(), 0.0f), 128255);
}

// --speculative sim: draft i is the sim's own token with probability rate, independently, so the
// first j drafts are all right with probability rate^j; a verification step of the backend gives
// the right tokens in its rows.
TEST(SimBackendTest, DraftsAreRightAtTheirRateAndTheStepVerifiesThem) {
  constexpr int kContexts = 20000;
  constexpr double kRate = 0.6;
  std::vector<int> right_prefix(5, 0);  // [j]: contexts whose first j drafts are right
  std::vector<TokenId> drafts;
  for (int c = 0; c < kContexts; ++c) {
    const std::vector<TokenId> context = {c % 977, 10 + c % 13, c};
    SimBackend::ProposeDrafts(context, 4, kRate, 128000, &drafts);
    ASSERT_EQ(drafts.size(), 4u);
    TokenId last = context.back();
    int j = 0;
    while (j < 4 && drafts[j] == SimBackend::NextToken(last, 3 + j, 128000)) last = drafts[j++];
    for (int k = 0; k <= j; ++k) ++right_prefix[k];
    for (TokenId d : drafts) ASSERT_LT(d, 128000);
  }
  for (int j = 1; j <= 4; ++j) {
    EXPECT_NEAR(static_cast<double>(right_prefix[j]) / kContexts, std::pow(kRate, j), 0.015)
        << j << " drafts";
  }
  SimBackend::ProposeDrafts({{7, 8}}, 3, 1.0, 128000, &drafts);
  EXPECT_EQ(drafts[0], SimBackend::NextToken(8, 2, 128000));
  EXPECT_EQ(drafts[2], SimBackend::NextToken(drafts[1], 4, 128000));
  SimBackend::ProposeDrafts({{7, 8}}, 3, 0.0, 128000, &drafts);
  EXPECT_NE(drafts[0], SimBackend::NextToken(8, 2, 128000));

  // The step: the last token and the drafts, a row each; the rows hold the sim's tokens.
  Recorded rec;
  auto b = SimBackend::Create(Llama8b(), SmallPool(&rec));
  ASSERT_TRUE(b.ok());
  std::vector<TokenId> tokens = {5, 6};
  SimBackend::ProposeDrafts(tokens, 3, 1.0, 128000, &drafts);
  tokens.insert(tokens.end(), drafts.begin(), drafts.end());
  std::vector<int32_t> table = {2};
  ForwardItem item{tokens, 0, table, true};
  item.num_logits = 4;
  std::vector<DeviceSampling> rows(4);
  std::vector<TokenId> out(4);
  ASSERT_TRUE((*b)->ForwardAndSample(ForwardBatch{{&item, 1}}, rows, out).ok());
  EXPECT_EQ(out[0], drafts[0]);
  EXPECT_EQ(out[2], drafts[2]);
  EXPECT_EQ(out[3], SimBackend::NextToken(drafts[2], 5, 128000));
}

TEST(SimBackendTest, WritesTheKvPatternIntoTheItemsBlocks) {
  Recorded rec;
  auto made = SimBackend::Create(Llama8b(), SmallPool(&rec, /*kv_scale=*/32));
  ASSERT_TRUE(made.ok());
  SimBackend& b = **made;
  const KvLayout& layout = b.kv_layout();
  ASSERT_EQ(layout.head_dim, 4);
  // 20 tokens: positions 0..15 in block 7, 16..19 in block 2; then a decode at position 20.
  std::vector<TokenId> prompt(20);
  for (int i = 0; i < 20; ++i) prompt[i] = 100 + i;
  std::vector<int32_t> table = {7, 2};
  ForwardItem prefill{prompt, 0, table, true};
  std::vector<DeviceSampling> rows(1);
  std::vector<TokenId> next(1);
  ASSERT_TRUE(b.ForwardAndSample(ForwardBatch{{&prefill, 1}}, rows, next).ok());
  std::vector<TokenId> step = {next[0]};
  ForwardItem decode{step, 20, table, true};
  ASSERT_TRUE(b.ForwardAndSample(ForwardBatch{{&decode, 1}}, rows, next).ok());
  const uint16_t* pool = static_cast<const uint16_t*>(b.kv_pool());
  for (int pos = 0; pos <= 20; ++pos) {
    const TokenId token = pos < 20 ? prompt[pos] : step[0];
    for (int l = 0; l < layout.num_layers; l += 7) {
      for (int kv = 0; kv < 2; ++kv) {
        for (int h = 0; h < layout.num_kv_heads; ++h) {
          const int64_t at = layout.Offset(l, kv, table[pos / 16], h, pos % 16);
          for (int d = 0; d < layout.head_dim; ++d) {
            ASSERT_EQ(pool[at + d], SimBackend::KvPatternWord(token, pos, l, kv, h))
                << "pos " << pos << " layer " << l << " kv " << kv << " head " << h;
          }
        }
      }
    }
  }
  // Blocks the items were not given stay zero.
  const int64_t untouched = layout.Offset(0, 0, 5, 0, 0);
  EXPECT_EQ(pool[untouched], 0);
}

TEST(SimBackendTest, UsesTheGivenPoolAllocator) {
  Recorded rec;
  SimBackendOptions o = SmallPool(&rec);
  std::vector<uint16_t> memory;
  size_t asked = 0;
  o.kv_pool_allocator = [&](size_t bytes) -> absl::StatusOr<void*> {
    asked = bytes;
    memory.assign(bytes / 2, 0);
    return static_cast<void*>(memory.data());
  };
  auto b = SimBackend::Create(Llama8b(), o);
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(asked, (*b)->kv_layout().total_bytes());
  EXPECT_EQ((*b)->kv_pool(), memory.data());
}

TEST(SimBackendTest, RejectsBadInputWithReasons) {
  Recorded rec;
  SimBackendOptions o = SmallPool(&rec);
  o.kv_scale = 3;
  EXPECT_EQ(SimBackend::Create(Llama8b(), o).status().code(), absl::StatusCode::kInvalidArgument);
  o = SmallPool(&rec);
  o.time_scale = 0;
  EXPECT_EQ(SimBackend::Create(Llama8b(), o).status().code(), absl::StatusCode::kInvalidArgument);
  o = SmallPool(&rec);
  o.gpu = "tpu";
  EXPECT_EQ(SimBackend::Create(Llama8b(), o).status().code(), absl::StatusCode::kNotFound);

  auto b = SimBackend::Create(Llama8b(), SmallPool(&rec));
  ASSERT_TRUE(b.ok());
  std::vector<TokenId> p = {5, 6};
  std::vector<int32_t> bad_table = {64};  // outside the 64-block pool
  ForwardItem item{p, 0, bad_table, true};
  std::vector<DeviceSampling> rows(1);
  std::vector<TokenId> out(1);
  EXPECT_EQ((*b)->ForwardAndSample(ForwardBatch{{&item, 1}}, rows, out).code(),
            absl::StatusCode::kInvalidArgument);
  std::vector<int32_t> table = {0};
  ForwardItem ok_item{p, 0, table, true};
  std::vector<DeviceSampling> two_rows(2);
  EXPECT_EQ((*b)->ForwardAndSample(ForwardBatch{{&ok_item, 1}}, two_rows, out).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ((*b)->stats().steps, 0);
}

}  // namespace
}  // namespace tandem
