#include "common/transport/cuda/nccl_api.h"

#include <dlfcn.h>
#include <glob.h>
#include <link.h>

#include <algorithm>
#include <cstdlib>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace tandem {
namespace {

constexpr const char* kLibrary = "libnccl.so.2";
constexpr const char* kWheelDir = "nvidia/nccl/lib/";

std::string Env(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr ? value : "";
}

std::string WithoutTrailingSlashes(std::string_view dir) {
  while (dir.size() > 1 && dir.back() == '/') dir.remove_suffix(1);
  return std::string(dir);
}

bool IsGlob(const std::string& pattern) {
  return pattern.find_first_of("*?[") != std::string::npos;
}

// The files `pattern` names: itself when it is no glob; its matches, sorted, otherwise.
std::vector<std::string> Expand(const std::string& pattern) {
  if (!IsGlob(pattern)) return {pattern};
  std::vector<std::string> files;
  glob_t matches{};
  if (glob(pattern.c_str(), 0, nullptr, &matches) == 0) {
    for (size_t i = 0; i < matches.gl_pathc; ++i) files.emplace_back(matches.gl_pathv[i]);
  }
  globfree(&matches);
  return files;
}

// The file the loader opened for `handle` (for a library found by name); `fallback` if unknown.
std::string LoadedPath(void* handle, const std::string& fallback) {
  struct link_map* map = nullptr;
  if (dlinfo(handle, RTLD_DI_LINKMAP, &map) == 0 && map != nullptr && map->l_name != nullptr &&
      *map->l_name != '\0') {
    return map->l_name;
  }
  return fallback;
}

// Resolves every function from an opened library; the name of the first one missing otherwise.
absl::StatusOr<NcclApi> Resolve(void* handle) {
  NcclApi api;
  std::string missing;
  auto resolve = [&](auto& fn, const char* name) {
    fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(handle, name));
    if (fn == nullptr && missing.empty()) missing = name;
  };
  resolve(api.GetVersion, "ncclGetVersion");
  resolve(api.GetErrorString, "ncclGetErrorString");
  resolve(api.GetUniqueId, "ncclGetUniqueId");
  resolve(api.CommInitRankConfig, "ncclCommInitRankConfig");
  resolve(api.CommAbort, "ncclCommAbort");
  resolve(api.CommGetAsyncError, "ncclCommGetAsyncError");
  resolve(api.GroupStart, "ncclGroupStart");
  resolve(api.GroupEnd, "ncclGroupEnd");
  resolve(api.Send, "ncclSend");
  resolve(api.Recv, "ncclRecv");
  if (!missing.empty()) return absl::NotFoundError(absl::StrCat("has no ", missing));
  if (api.GetVersion(&api.version) != ncclSuccess) {
    return absl::InternalError("ncclGetVersion failed");
  }
  return api;
}

}  // namespace

NcclSearchEnv NcclSearchEnvFromProcess() {
  return {.tandem_nccl_lib = Env("TANDEM_NCCL_LIB"),
          .cuda_home = Env("CUDA_HOME"),
          .virtual_env = Env("VIRTUAL_ENV")};
}

std::vector<std::string> NcclSearchPatterns(const NcclSearchEnv& env) {
  if (!env.tandem_nccl_lib.empty()) return {env.tandem_nccl_lib};
  std::vector<std::string> patterns;
  auto add = [&patterns](std::string pattern) {
    if (std::find(patterns.begin(), patterns.end(), pattern) == patterns.end()) {
      patterns.push_back(std::move(pattern));
    }
  };
  add(kLibrary);
  if (!env.cuda_home.empty()) {
    add(absl::StrCat(WithoutTrailingSlashes(env.cuda_home), "/lib64/", kLibrary));
  }
  add(absl::StrCat("/usr/local/cuda/lib64/", kLibrary));
  add(absl::StrCat("/usr/local/cuda/lib/", kLibrary));
  if (!env.virtual_env.empty()) {
    add(absl::StrCat(WithoutTrailingSlashes(env.virtual_env), "/lib/python3*/site-packages/",
                     kWheelDir, kLibrary));
  }
  add(absl::StrCat("/opt/*/.venv/lib/python3*/site-packages/", kWheelDir, kLibrary));
  add(absl::StrCat("/usr/local/lib/python3*/dist-packages/", kWheelDir, kLibrary));
  add(absl::StrCat("/usr/lib/python3/dist-packages/", kWheelDir, kLibrary));
  return patterns;
}

absl::StatusOr<NcclApi> LoadNcclFrom(const std::vector<std::string>& patterns,
                                     std::string_view hint) {
  std::vector<std::string> failures;
  for (const std::string& pattern : patterns) {
    const std::vector<std::string> files = Expand(pattern);
    if (files.empty()) failures.push_back(absl::StrCat(pattern, ": no match"));
    for (const std::string& file : files) {
      void* handle = dlopen(file.c_str(), RTLD_NOW | RTLD_LOCAL);
      if (handle == nullptr) {
        const char* error = dlerror();
        // dlerror names the file it could not open; say it when it does not.
        std::string why = error != nullptr ? error : "dlopen failed";
        if (why.find(file) == std::string::npos) why = absl::StrCat(file, ": ", why);
        failures.push_back(std::move(why));
        continue;
      }
      absl::StatusOr<NcclApi> api = Resolve(handle);
      const std::string path = LoadedPath(handle, file);
      if (!api.ok()) {
        failures.push_back(absl::StrCat(path, ": ", api.status().message()));
        dlclose(handle);
        continue;
      }
      api->path = path;
      return api;
    }
  }
  return absl::UnavailableError(absl::StrCat("cannot load NCCL; tried ",
                                             absl::StrJoin(failures, "; "),
                                             hint.empty() ? "" : ". ", std::string(hint)));
}

std::string NcclSearchHint(const NcclSearchEnv& env) {
  if (!env.tandem_nccl_lib.empty()) {
    return absl::StrCat("TANDEM_NCCL_LIB=", env.tandem_nccl_lib,
                        " is set, so it is the only place searched: point it at libnccl.so.2 or "
                        "unset it to search the usual places");
  }
  return "Install NCCL (e.g. pip install nvidia-nccl-cu13) or set TANDEM_NCCL_LIB to the full path "
         "of libnccl.so.2";
}

absl::StatusOr<NcclApi> SearchNccl(const NcclSearchEnv& env) {
  return LoadNcclFrom(NcclSearchPatterns(env), NcclSearchHint(env));
}

absl::StatusOr<const NcclApi*> LoadNccl() {
  static const absl::StatusOr<NcclApi>* const loaded =
      new absl::StatusOr<NcclApi>(SearchNccl(NcclSearchEnvFromProcess()));
  if (!loaded->ok()) return loaded->status();
  return &**loaded;
}

std::string NcclVersionString(int code) {
  if (code >= 10000) return absl::StrCat(code / 10000, ".", code % 10000 / 100, ".", code % 100);
  return absl::StrCat(code / 1000, ".", code % 1000 / 100, ".", code % 100);
}

}  // namespace tandem
