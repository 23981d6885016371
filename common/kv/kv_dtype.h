// The element types a KV pool can store, with the names flags and the wire use for them:
// "f32", "f16", "bf16", "fp8_e4m3" (--kv-cache-dtype adds "auto": the backend's default).
#ifndef TANDEM_COMMON_KV_KV_DTYPE_H_
#define TANDEM_COMMON_KV_KV_DTYPE_H_

#include <optional>
#include <string_view>

#include "common/types/dtype.h"

namespace tandem {

inline const char* KvDTypeName(DType dtype) {
  switch (dtype) {
    case DType::kF32:
      return "f32";
    case DType::kF16:
      return "f16";
    case DType::kBF16:
      return "bf16";
    case DType::kFP8E4M3:
      return "fp8_e4m3";
  }
  return "?";
}

// The descriptor's spelling (KvDTypeName), plus "fp8" for fp8_e4m3; nullopt for anything else.
inline std::optional<DType> ParseKvDType(std::string_view s) {
  if (s == "f32") return DType::kF32;
  if (s == "f16") return DType::kF16;
  if (s == "bf16") return DType::kBF16;
  if (s == "fp8_e4m3" || s == "fp8") return DType::kFP8E4M3;
  return std::nullopt;
}

// --kv-cache-dtype: "auto" (the backend's default: f32 on cpu, bf16 on cuda and sim) or a dtype
// the KV cache can store.
struct KvCacheDType {
  std::optional<DType> dtype;  // nullopt: auto

  DType Or(DType backend_default) const { return dtype.value_or(backend_default); }
  bool operator==(const KvCacheDType&) const = default;
};

// "auto", "f32", "bf16", "fp8_e4m3" (or "fp8"). f16 is not offered: no backend stores it.
inline std::optional<KvCacheDType> ParseKvCacheDType(std::string_view s) {
  if (s == "auto") return KvCacheDType{};
  std::optional<DType> d = ParseKvDType(s);
  if (!d.has_value() || *d == DType::kF16) return std::nullopt;
  return KvCacheDType{d};
}

inline constexpr std::string_view kKvCacheDTypeChoices = "auto|f32|bf16|fp8_e4m3";

// Whether the cuda backend stores `dtype` (bf16, its default, or fp8_e4m3); f32 KV on a GPU would
// double bf16's bytes for nothing its kernels use (they compute in bf16 on tensor cores).
inline bool CudaStoresKvDType(KvCacheDType dtype) {
  const DType d = dtype.Or(DType::kBF16);
  return d == DType::kBF16 || d == DType::kFP8E4M3;
}
inline constexpr char kCudaKvDTypeRefusal[] =
    ": the cuda backend stores KV as bf16 or fp8_e4m3 (use auto, bf16 or fp8_e4m3)";

}  // namespace tandem

#endif  // TANDEM_COMMON_KV_KV_DTYPE_H_
