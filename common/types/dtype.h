// Element types of tensors in model files and KV caches.
#ifndef TANDEM_COMMON_TYPES_DTYPE_H_
#define TANDEM_COMMON_TYPES_DTYPE_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace tandem {

// kFP8E4M3 (common/util/fp8.h) is a KV cache dtype only: model weights are F32, F16 or BF16.
enum class DType : uint8_t { kF32, kF16, kBF16, kFP8E4M3 };

inline size_t DTypeSize(DType t) {
  switch (t) {
    case DType::kF32:
      return 4;
    case DType::kF16:
    case DType::kBF16:
      return 2;
    case DType::kFP8E4M3:
      return 1;
  }
  return 4;
}

// Safetensors spelling: "F32", "F16", "BF16", "F8_E4M3".
inline std::string_view DTypeName(DType t) {
  switch (t) {
    case DType::kF32:
      return "F32";
    case DType::kF16:
      return "F16";
    case DType::kBF16:
      return "BF16";
    case DType::kFP8E4M3:
      return "F8_E4M3";
  }
  return "?";
}

// Model weight dtypes only (never kFP8E4M3). Accepts safetensors ("F32", "BF16") and Hugging Face
// torch_dtype ("float32", "bfloat16") names.
inline std::optional<DType> ParseDType(std::string_view s) {
  if (s == "F32" || s == "float32" || s == "f32") return DType::kF32;
  if (s == "F16" || s == "float16" || s == "f16" || s == "half") return DType::kF16;
  if (s == "BF16" || s == "bfloat16" || s == "bf16") return DType::kBF16;
  return std::nullopt;
}

// Token ids are 32-bit everywhere (vocabularies stay far below 2^31).
using TokenId = int32_t;

}  // namespace tandem

#endif  // TANDEM_COMMON_TYPES_DTYPE_H_
