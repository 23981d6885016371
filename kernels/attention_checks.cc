#include "kernels/attention_checks.h"

#include <cstdint>

#include "absl/strings/str_cat.h"

namespace tandem::kernels {
namespace {

bool Aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

}  // namespace

absl::Status CheckAttentionShape(const std::string& kernel, const KvLayout& layout, int num_heads,
                                 int layer, int sliding_window, const float* kv_scales) {
  auto invalid = [&](const std::string& what) {
    return absl::InvalidArgumentError(absl::StrCat(kernel, ": ", what));
  };
  if (layout.dtype != DType::kBF16 && layout.dtype != DType::kFP8E4M3) {
    return invalid(absl::StrCat("layout.dtype ", std::string(DTypeName(layout.dtype)),
                                " is not BF16 or F8_E4M3"));
  }
  if (layout.dtype == DType::kFP8E4M3 && kv_scales == nullptr) {
    return invalid("kv_scales is null (an fp8 pool needs its scales)");
  }
  if (layout.head_dim != 64 && layout.head_dim != 128) {
    return invalid(absl::StrCat("layout.head_dim ", layout.head_dim, " is not 64 or 128"));
  }
  if (layout.num_kv_heads <= 0) {
    return invalid(absl::StrCat("layout.num_kv_heads ", layout.num_kv_heads, " <= 0"));
  }
  if (num_heads <= 0 || num_heads % layout.num_kv_heads != 0) {
    return invalid(absl::StrCat("num_heads ", num_heads, " is not a positive multiple of ",
                                "num_kv_heads ", layout.num_kv_heads));
  }
  if (num_heads > 65535) {
    return invalid(absl::StrCat("num_heads ", num_heads, " > 65535 (grid limit)"));
  }
  if (layer < 0 || layer >= layout.num_layers) {
    return invalid(absl::StrCat("layer ", layer, " not in [0, ", layout.num_layers, ")"));
  }
  if (layout.block_size <= 0) {
    return invalid(absl::StrCat("layout.block_size ", layout.block_size, " <= 0"));
  }
  if (layout.num_blocks <= 0) {
    return invalid(absl::StrCat("layout.num_blocks ", layout.num_blocks, " <= 0"));
  }
  if (sliding_window < 0) return invalid(absl::StrCat("sliding_window ", sliding_window, " < 0"));
  return absl::OkStatus();
}

absl::Status CheckAttentionPointers(const std::string& kernel, const void* q, const void* out,
                                    const void* kv_pool) {
  for (const auto& [p, name] : {std::pair{q, "q"}, std::pair{out, "out"}, {kv_pool, "kv_pool"}}) {
    if (!Aligned16(p)) {
      return absl::InvalidArgumentError(
          absl::StrCat(kernel, ": ", name, " is not 16-byte aligned"));
    }
  }
  return absl::OkStatus();
}

LayerKv LayerKvOf(const KvLayout& layout, const void* kv_pool, const float* kv_scales, int layer) {
  const auto* pool = static_cast<const uint8_t*>(kv_pool);
  const size_t element = DTypeSize(layout.dtype);
  LayerKv kv;
  kv.k = pool + layout.Offset(layer, 0, 0, 0, 0) * element;
  kv.v = pool + layout.Offset(layer, 1, 0, 0, 0) * element;
  kv.fp8 = layout.dtype == DType::kFP8E4M3;
  if (kv.fp8) {
    kv.k_scales = kv_scales + 2 * layer * layout.num_kv_heads;
    kv.v_scales = kv.k_scales + layout.num_kv_heads;
  }
  return kv;
}

}  // namespace tandem::kernels
