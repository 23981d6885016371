#include "kernels/cublaslt_api.h"

#include <dlfcn.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace tandem::kernels {
namespace {

constexpr const char* kLibrary = "libcublasLt.so.13";

absl::StatusOr<CublasLtApi> Load() {
  std::vector<std::string> candidates = {kLibrary};
  if (const char* home = std::getenv("CUDA_HOME"); home != nullptr && *home != '\0') {
    candidates.push_back(absl::StrCat(home, "/lib64/", kLibrary));
  }
  candidates.push_back(absl::StrCat("/usr/local/cuda/lib64/", kLibrary));
  candidates.push_back(absl::StrCat("/usr/local/cuda/lib/", kLibrary));
  void* handle = nullptr;
  std::vector<std::string> errors;
  for (const std::string& path : candidates) {
    handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle != nullptr) break;
    const char* error = dlerror();
    errors.push_back(error != nullptr ? error : path);
  }
  if (handle == nullptr) {
    return absl::UnavailableError(
        absl::StrCat("cannot load cuBLASLt: ", absl::StrJoin(errors, "; ")));
  }
  CublasLtApi api;
  std::string missing;
  auto resolve = [&](auto& fn, const char* name) {
    fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(handle, name));
    if (fn == nullptr) missing = name;
  };
  resolve(api.Create, "cublasLtCreate");
  resolve(api.Destroy, "cublasLtDestroy");
  resolve(api.GetVersion, "cublasLtGetVersion");
  resolve(api.GetStatusString, "cublasLtGetStatusString");
  resolve(api.Matmul, "cublasLtMatmul");
  resolve(api.MatmulAlgoGetHeuristic, "cublasLtMatmulAlgoGetHeuristic");
  resolve(api.MatmulDescCreate, "cublasLtMatmulDescCreate");
  resolve(api.MatmulDescDestroy, "cublasLtMatmulDescDestroy");
  resolve(api.MatmulDescSetAttribute, "cublasLtMatmulDescSetAttribute");
  resolve(api.MatmulPreferenceCreate, "cublasLtMatmulPreferenceCreate");
  resolve(api.MatmulPreferenceDestroy, "cublasLtMatmulPreferenceDestroy");
  resolve(api.MatmulPreferenceSetAttribute, "cublasLtMatmulPreferenceSetAttribute");
  resolve(api.MatrixLayoutCreate, "cublasLtMatrixLayoutCreate");
  resolve(api.MatrixLayoutDestroy, "cublasLtMatrixLayoutDestroy");
  if (!missing.empty()) {
    return absl::UnavailableError(absl::StrCat(kLibrary, " has no ", missing));
  }
  return api;
}

}  // namespace

absl::StatusOr<const CublasLtApi*> LoadCublasLt() {
  static const absl::StatusOr<CublasLtApi>* const loaded = new absl::StatusOr<CublasLtApi>(Load());
  if (!loaded->ok()) return loaded->status();
  return &**loaded;
}

}  // namespace tandem::kernels
