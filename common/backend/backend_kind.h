// Which Backend implementation a binary runs (--backend): the name on the command line, parsed
// once into an enum that the rest of the code switches on.
#ifndef TANDEM_COMMON_BACKEND_BACKEND_KIND_H_
#define TANDEM_COMMON_BACKEND_BACKEND_KIND_H_

#include <optional>
#include <string_view>

namespace tandem {

enum class BackendKind {
  kCpu,   // CpuBackend: f32 on the host (common/backend)
  kCuda,  // CudaBackend: bf16 on a GPU, builds with CUDA only (common/backend/cuda)
  kSim,  // SimBackend: a named GPU's roofline step times, deterministic tokens (common/backend/sim)
};

// "cpu", "cuda" or "sim".
constexpr std::string_view BackendKindName(BackendKind kind) {
  switch (kind) {
    case BackendKind::kCpu:
      return "cpu";
    case BackendKind::kCuda:
      return "cuda";
    case BackendKind::kSim:
      return "sim";
  }
  return "?";
}

// The kind BackendKindName(kind) names, or nullopt for any other text.
constexpr std::optional<BackendKind> ParseBackendKind(std::string_view name) {
  for (BackendKind kind : {BackendKind::kCpu, BackendKind::kCuda, BackendKind::kSim}) {
    if (name == BackendKindName(kind)) return kind;
  }
  return std::nullopt;
}

}  // namespace tandem

#endif  // TANDEM_COMMON_BACKEND_BACKEND_KIND_H_
