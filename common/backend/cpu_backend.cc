#include "common/backend/cpu_backend.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/backend/rope.h"
#include "common/util/status_macros.h"

namespace tandem {

absl::StatusOr<std::unique_ptr<CpuBackend>> CpuBackend::Create(const ModelWeights& weights,
                                                               const CpuBackendOptions& options) {
  if (options.num_threads < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("num_threads must be >= 0 (0: all cores), got ", options.num_threads));
  }
  if (options.block_size <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("KV block_size must be positive, got ", options.block_size));
  }
  if (options.num_kv_blocks < 0 || options.max_batch_tokens < 0) {
    return absl::InvalidArgumentError("num_kv_blocks and max_batch_tokens must not be negative");
  }
  if (options.kv_dtype == DType::kF16) {
    return absl::InvalidArgumentError(
        "the cpu backend stores KV as f32, bf16 or fp8_e4m3, not f16");
  }
  if (options.num_kv_blocks == 0 && options.kv_cache_bytes == 0) {
    return absl::InvalidArgumentError("KV pool has no blocks: set num_kv_blocks or kv_cache_bytes");
  }
  auto threads = std::make_unique<ThreadPool>(options.num_threads);
  ASSIGN_OR_RETURN(CpuWeights packed, PackCpuWeights(weights, *threads));

  const ModelConfig& config = weights.config;
  KvLayout layout;
  layout.dtype = options.kv_dtype;
  layout.num_layers = config.num_layers;
  layout.num_kv_heads = config.num_kv_heads;
  layout.head_dim = config.head_dim;
  layout.block_size = options.block_size;
  layout.num_blocks = 1;
  const size_t block_bytes = layout.total_bytes();  // one block across all layers, K and V
  if (options.num_kv_blocks > 0) {
    layout.num_blocks = options.num_kv_blocks;
  } else if (options.kv_cache_bytes >= block_bytes) {
    layout.num_blocks =
        static_cast<int32_t>(std::min<size_t>(options.kv_cache_bytes / block_bytes, INT32_MAX));
  } else {
    return absl::InvalidArgumentError(absl::StrCat(
        "KV pool has no blocks: set num_kv_blocks, or kv_cache_bytes to at least one block (",
        block_bytes, " bytes)"));
  }

  auto backend = std::unique_ptr<CpuBackend>(
      new CpuBackend(config, std::move(packed), layout, std::move(threads)));
  backend->kv_elements_ = static_cast<size_t>(layout.total_elements());
  if (options.kv_pool_allocator) {
    ASSIGN_OR_RETURN(void* pool, options.kv_pool_allocator(layout.total_bytes()));
    if (pool == nullptr || reinterpret_cast<uintptr_t>(pool) % 64 != 0) {
      return absl::InternalError("the KV pool allocator returned null or unaligned memory");
    }
    backend->kv_data_ = pool;
  } else {
    if (!backend->kv_.Reset((layout.total_bytes() + sizeof(float) - 1) / sizeof(float))) {
      return absl::ResourceExhaustedError(
          absl::StrCat("cannot allocate the KV pool: ", layout.total_bytes(), " bytes"));
    }
    backend->kv_data_ = backend->kv_.data();
  }
  RETURN_IF_ERROR(backend->EnsureCapacity(std::max(1, options.max_batch_tokens),
                                          std::min(config.max_position_embeddings, 4096)));
  if (layout.dtype == DType::kFP8E4M3) RETURN_IF_ERROR(backend->CalibrateFp8Scales());
  return backend;
}

CpuBackend::CpuBackend(const ModelConfig& config, CpuWeights weights, const KvLayout& layout,
                       std::unique_ptr<ThreadPool> threads)
    : config_(config),
      weights_(std::move(weights)),
      layout_(layout),
      threads_(std::move(threads)),
      inv_freq_(RopeInvFreq(config)) {}

absl::Status CpuBackend::CopyBlock(int32_t src, int32_t dst) {
  if (src < 0 || src >= layout_.num_blocks || dst < 0 || dst >= layout_.num_blocks) {
    return absl::InvalidArgumentError(absl::StrCat(
        "CopyBlock(", src, ", ", dst, ") outside the pool of ", layout_.num_blocks, " blocks"));
  }
  if (src == dst) return absl::OkStatus();
  const size_t elem = DTypeSize(layout_.dtype);
  const size_t bytes = static_cast<size_t>(layout_.block_stride()) * elem;
  uint8_t* pool = static_cast<uint8_t*>(kv_data_);
  for (int l = 0; l < layout_.num_layers; ++l) {
    for (int kv = 0; kv < 2; ++kv) {
      std::memcpy(pool + layout_.Offset(l, kv, dst, 0, 0) * elem,
                  pool + layout_.Offset(l, kv, src, 0, 0) * elem, bytes);
    }
  }
  return absl::OkStatus();
}

absl::Status CpuBackend::EnsureCapacity(int tokens, int64_t max_context) {
  const int group = config_.num_heads / config_.num_kv_heads;
  const size_t scores =
      static_cast<size_t>(group) * static_cast<size_t>(std::max<int64_t>(1, max_context));
  Scratch& s = scratch_;
  s.scores.resize(threads_->num_threads());
  for (AlignedFloats& buf : s.scores) {
    if (!buf.EnsureSize(scores)) {
      return absl::ResourceExhaustedError(
          absl::StrCat("cannot allocate attention scratch for a context of ", max_context));
    }
  }
  if (tokens <= s.capacity) return absl::OkStatus();
  const size_t t = static_cast<size_t>(tokens);
  const size_t hidden = config_.hidden_size;
  const size_t qkv = config_.q_size() + 2 * config_.kv_size();
  const size_t inter = config_.intermediate_size;
  const size_t half = config_.head_dim / 2;
  const bool ok = s.x.Reset(t * hidden) && s.h.Reset(t * hidden) && s.qkv.Reset(t * qkv) &&
                  s.attn.Reset(t * config_.q_size()) && s.gate_up.Reset(t * 2 * inter) &&
                  s.act.Reset(t * inter) && s.rope_cos.Reset(t * half) &&
                  s.rope_sin.Reset(t * half);
  if (!ok) {
    s.capacity = 0;
    return absl::ResourceExhaustedError(
        absl::StrCat("cannot allocate forward scratch for ", tokens, " tokens"));
  }
  s.token_item.resize(t);
  s.token_pos.resize(t);
  s.logit_rows.resize(t);
  s.all_rows.resize(t);
  for (int i = 0; i < tokens; ++i) s.all_rows[i] = i;
  s.capacity = tokens;
  return absl::OkStatus();
}

}  // namespace tandem
