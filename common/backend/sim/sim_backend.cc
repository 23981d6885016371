#include "common/backend/sim/sim_backend.h"

#include <sys/mman.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/backend/batch_validation.h"
#include "common/backend/sim/gpu_spec.h"
#include "common/kv/kv_scales.h"
#include "common/util/status_macros.h"

namespace tandem {
namespace {

uint64_t Mix(uint64_t x) {  // splitmix64's finalizer
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

bool IsPowerOfTwo(int v) { return v > 0 && (v & (v - 1)) == 0; }

int32_t TokenLimit(const ModelConfig& config) {
  int32_t limit = config.vocab_size;
  auto lower_to = [&](int id) {
    if (id >= config.vocab_size / 2 && id < limit) limit = id;
  };
  lower_to(config.bos_token_id);
  for (int id : config.eos_token_ids) lower_to(id);
  return std::max(limit, 1);
}

}  // namespace

TokenId SimBackend::NextToken(TokenId last_token, int64_t position, int32_t token_limit) {
  const uint64_t h = Mix((static_cast<uint64_t>(static_cast<uint32_t>(last_token)) << 40) ^
                         static_cast<uint64_t>(position));
  return static_cast<TokenId>(h % static_cast<uint64_t>(token_limit));
}

bool SimBackend::DraftIsRight(TokenId last_token, int64_t position, double acceptance_rate) {
  const uint64_t h = Mix(Mix(static_cast<uint64_t>(position) ^ 0x5be3c1d2a4f60789ULL) ^
                         static_cast<uint64_t>(static_cast<uint32_t>(last_token)));
  return static_cast<double>(h >> 11) * 0x1.0p-53 < acceptance_rate;
}

void SimBackend::ProposeDrafts(std::span<const TokenId> context, int32_t max_drafts,
                               double acceptance_rate, int32_t token_limit,
                               std::vector<TokenId>* drafts) {
  drafts->clear();
  if (context.empty() || token_limit < 2) return;
  TokenId last = context.back();
  int64_t position = static_cast<int64_t>(context.size());  // the new token's
  for (int32_t i = 0; i < max_drafts; ++i, ++position) {
    const TokenId right = NextToken(last, position, token_limit);
    // A wrong draft: the next token id (wrapping), never the right one.
    const TokenId draft =
        DraftIsRight(last, position, acceptance_rate) ? right : (right + 1) % token_limit;
    drafts->push_back(draft);
    last = draft;
  }
}

uint16_t SimBackend::KvPatternWord(TokenId token, int64_t position, int layer, int kv, int head) {
  const uint64_t h = Mix(Mix(static_cast<uint64_t>(static_cast<uint32_t>(token)) ^
                             (static_cast<uint64_t>(position) << 24)) ^
                         (static_cast<uint64_t>(layer) << 8 | static_cast<uint64_t>(kv) << 7 |
                          static_cast<uint64_t>(head)));
  return static_cast<uint16_t>(h & 0x7f7f);  // a finite bf16 pair of bytes, never NaN/Inf
}

absl::StatusOr<std::unique_ptr<SimBackend>> SimBackend::Create(const ModelConfig& config,
                                                               const SimBackendOptions& options) {
  ASSIGN_OR_RETURN(GpuSpec gpu, FindGpuSpec(options.gpu));
  ASSIGN_OR_RETURN(StepTimeModel model,
                   StepTimeModel::Create(gpu, config, options.tensor_parallel, options.kv_dtype));
  if (options.block_size < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("--block-size must be at least 1, not ", options.block_size));
  }
  if (!IsPowerOfTwo(options.kv_scale) || config.head_dim % options.kv_scale != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--sim-kv-scale must be a power of two dividing head_dim ", config.head_dim,
                     ", not ", options.kv_scale));
  }
  if (!(options.time_scale > 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--sim-time-scale must be positive, not ", options.time_scale));
  }
  KvLayout layout;
  layout.dtype = options.kv_dtype;
  if (layout.dtype == DType::kF16) {
    return absl::InvalidArgumentError("sim: the KV cache stores bf16, fp8_e4m3 or f32, not f16");
  }
  layout.num_layers = config.num_layers;
  layout.num_kv_heads = config.num_kv_heads;
  layout.head_dim = config.head_dim / options.kv_scale;
  layout.block_size = options.block_size;
  if (options.num_kv_blocks > 0) {
    layout.num_blocks = options.num_kv_blocks;
  } else {
    ASSIGN_OR_RETURN(int64_t kv_bytes, model.KvCacheBytes(options.memory_utilization));
    const int64_t blocks = kv_bytes / (model.KvBytesPerToken() * options.block_size);
    if (blocks < 1 || blocks > INT32_MAX) {
      return absl::FailedPreconditionError(
          absl::StrCat("sim: the KV cache would have ", blocks, " blocks"));
    }
    layout.num_blocks = static_cast<int32_t>(blocks);
  }
  if (layout.dtype == DType::kFP8E4M3) {
    // The sim computes nothing, so it has no calibration: its fp8 pool is read against unit
    // scales, named like any other (sim nodes pair with sim nodes).
    KvScales unit;
    unit.num_layers = layout.num_layers;
    unit.num_kv_heads = layout.num_kv_heads;
    unit.values.assign(static_cast<size_t>(layout.num_layers) * 2 * layout.num_kv_heads, 1.0f);
    layout.scale_fingerprint = KvScalesFingerprint(unit);
  }
  auto backend = std::unique_ptr<SimBackend>(new SimBackend(config, layout, model, options));
  const size_t bytes = layout.total_bytes();
  if (options.kv_pool_allocator) {
    ASSIGN_OR_RETURN(void* pool, options.kv_pool_allocator(bytes));
    backend->pool_ = static_cast<uint8_t*>(pool);
  } else {
    void* pool = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (pool == MAP_FAILED) {
      return absl::ResourceExhaustedError(
          absl::StrCat("sim: cannot map a KV pool of ", bytes >> 20, " MiB"));
    }
    backend->pool_ = static_cast<uint8_t*>(pool);
    backend->owns_pool_ = true;
  }
  return backend;
}

SimBackend::SimBackend(const ModelConfig& config, const KvLayout& layout, StepTimeModel model,
                       const SimBackendOptions& options)
    : config_(config),
      layout_(layout),
      model_(std::move(model)),
      options_(options),
      token_limit_(TokenLimit(config)) {}

SimBackend::~SimBackend() {
  if (owns_pool_ && pool_ != nullptr) munmap(pool_, layout_.total_bytes());
}

SimBackendStats SimBackend::stats() const {
  absl::MutexLock lock(&mu_);
  return stats_;
}

void SimBackend::WriteKvPattern(const ForwardItem& item) {
  const int64_t n = static_cast<int64_t>(item.tokens.size());
  const size_t elem = DTypeSize(layout_.dtype);
  for (int64_t i = 0; i < n; ++i) {
    const int64_t pos = item.start_pos + i;
    const int block = item.block_table[pos / layout_.block_size];
    const int slot = static_cast<int>(pos % layout_.block_size);
    for (int l = 0; l < layout_.num_layers; ++l) {
      for (int kv = 0; kv < 2; ++kv) {
        for (int h = 0; h < layout_.num_kv_heads; ++h) {
          const uint16_t word = KvPatternWord(item.tokens[i], pos, l, kv, h);
          uint8_t* row = pool_ + layout_.Offset(l, kv, block, h, slot) * elem;
          for (int e = 0; e < layout_.head_dim; ++e, row += elem) {
            if (elem == 1) {
              row[0] = static_cast<uint8_t>(word);
            } else {
              std::memcpy(row, &word, 2);
              if (elem == 4) std::memcpy(row + 2, &word, 2);
            }
          }
        }
      }
    }
  }
}

absl::StatusOr<absl::Duration> SimBackend::Step(const ForwardBatch& batch, size_t logits_capacity,
                                                std::span<TokenId> next_tokens) {
  RETURN_IF_ERROR(ValidateForwardBatch(batch, logits_capacity, config_, layout_));
  std::vector<SimStepItem> items;
  items.reserve(batch.items.size());
  size_t row = 0;
  for (const ForwardItem& item : batch.items) {
    items.push_back({static_cast<int64_t>(item.tokens.size()), item.start_pos, item.want_logits,
                     LogitsRows(item)});
    WriteKvPattern(item);
    // Each row: the sim's token after the token at that position.
    const int64_t n = static_cast<int64_t>(item.tokens.size());
    for (int64_t j = n - LogitsRows(item); j < n; ++j) {
      next_tokens[row++] = NextToken(item.tokens[j], item.start_pos + j + 1, token_limit_);
    }
  }
  const StepTime time = model_.Time(items);
  {
    absl::MutexLock lock(&mu_);
    ++stats_.steps;
    stats_.modelled_busy_s += time.total_s();
    stats_.last_step = time;
    stats_.last_cost = model_.Cost(items);
  }
  return absl::Seconds(time.total_s() * options_.time_scale);
}

void SimBackend::WaitUntil(absl::Time end) {
  const absl::Duration left = end - options_.clock->Now();
  if (options_.wait) {
    options_.wait(std::max(left, absl::ZeroDuration()));
  } else if (left > absl::ZeroDuration()) {
    absl::SleepFor(left);
  }
}

absl::Status SimBackend::Forward(const ForwardBatch& batch, LogitsOutput out) {
  const absl::Time start = options_.clock->Now();
  size_t rows = 0;
  for (const ForwardItem& item : batch.items) rows += LogitsRows(item);
  std::vector<TokenId> next(rows);
  ASSIGN_OR_RETURN(absl::Duration step, Step(batch, out.logits.size(), std::span<TokenId>(next)));
  // Logits that any sampler turns into the sim's token: 0 everywhere, +50 on the token.
  const size_t vocab = static_cast<size_t>(config_.vocab_size);
  for (size_t r = 0; r < rows; ++r) {
    std::span<float> logits = out.logits.subspan(r * vocab, vocab);
    std::fill(logits.begin(), logits.end(), 0.0f);
    logits[static_cast<size_t>(next[r])] = 50.0f;
  }
  WaitUntil(start + step);
  return absl::OkStatus();
}

absl::Status SimBackend::ForwardAndSample(const ForwardBatch& batch,
                                          std::span<const DeviceSampling> rows,
                                          std::span<TokenId> tokens) {
  const absl::Time start = options_.clock->Now();
  size_t want = 0;
  for (const ForwardItem& item : batch.items) want += LogitsRows(item);
  if (rows.size() != want || tokens.size() != want) {
    return absl::InvalidArgumentError(absl::StrCat("sim: ", want, " logits rows but ", rows.size(),
                                                   " sampling rows and ", tokens.size(),
                                                   " token slots"));
  }
  ASSIGN_OR_RETURN(absl::Duration step,
                   Step(batch, want * static_cast<size_t>(config_.vocab_size), tokens));
  WaitUntil(start + step);
  return absl::OkStatus();
}

}  // namespace tandem
