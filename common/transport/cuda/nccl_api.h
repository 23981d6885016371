// NCCL, loaded on first use with dlopen instead of linked (the pattern of kernels/cublaslt_api.h).
// libnccl is not part of the CUDA toolkit: a GPU machine may have it only as a Python wheel
// (nvidia-nccl-cu13 in a PyTorch venv). Linked, every binary that links the transports would need
// it at start-up, even nodes that never use `--kv-transport nccl`; loaded with dlopen, only an
// NcclKvTransport needs it, and a machine without it fails that transport's creation with a
// Status that names every place searched.
//
// The code still compiles against nccl.h, for its types, enums and NCCL_CONFIG_INITIALIZER. A
// library older than the header reads the part of ncclConfig_t it knows (the struct carries its
// size and version), so the header only has to be at least as new as any library loaded.
//
// Where the library is searched, in order (the first file that loads and has every function below
// wins):
//   1. $TANDEM_NCCL_LIB, the full path of the library. When set, only it: nothing else is tried.
//   2. "libnccl.so.2" by name: the dynamic loader's own search (LD_LIBRARY_PATH, the ld cache).
//   3. $CUDA_HOME/lib64, /usr/local/cuda/lib64, /usr/local/cuda/lib.
//   4. Python wheels (nvidia-nccl-cu*), in nvidia/nccl/lib/ under
//      $VIRTUAL_ENV/lib/python3*/site-packages, /opt/*/.venv/lib/python3*/site-packages,
//      /usr/local/lib/python3*/dist-packages and /usr/lib/python3/dist-packages.
#ifndef TANDEM_COMMON_TRANSPORT_CUDA_NCCL_API_H_
#define TANDEM_COMMON_TRANSPORT_CUDA_NCCL_API_H_

#include <nccl.h>

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace tandem {

// The NCCL functions tandem calls, resolved from one library.
struct NcclApi {
  std::string path;  // the file loaded (the loader's answer when found by name)
  int version = 0;   // ncclGetVersion's code (NcclVersionString reads it)

  decltype(&ncclGetVersion) GetVersion = nullptr;
  decltype(&ncclGetErrorString) GetErrorString = nullptr;
  decltype(&ncclGetUniqueId) GetUniqueId = nullptr;
  decltype(&ncclCommInitRankConfig) CommInitRankConfig = nullptr;
  decltype(&ncclCommAbort) CommAbort = nullptr;
  decltype(&ncclCommGetAsyncError) CommGetAsyncError = nullptr;
  decltype(&ncclGroupStart) GroupStart = nullptr;
  decltype(&ncclGroupEnd) GroupEnd = nullptr;
  decltype(&ncclSend) Send = nullptr;
  decltype(&ncclRecv) Recv = nullptr;
};

// What the search reads from the environment.
struct NcclSearchEnv {
  std::string tandem_nccl_lib;  // $TANDEM_NCCL_LIB
  std::string cuda_home;        // $CUDA_HOME
  std::string virtual_env;      // $VIRTUAL_ENV
};
NcclSearchEnv NcclSearchEnvFromProcess();

// The places to try, in the order above: file paths, the bare soname, and glob patterns (* ? [).
// Only {tandem_nccl_lib} when that is set.
std::vector<std::string> NcclSearchPatterns(const NcclSearchEnv& env);

// Tries each of `patterns` in order (a glob pattern: each file it matches, in sorted order) and
// returns the first library that dlopen opens and that has every function of NcclApi, its version
// read. Unavailable otherwise, naming every path tried and why it failed ("no match" for a pattern
// that matched nothing), then `hint`. Not cached: each call opens the library again (dlopen shares
// a library already loaded).
absl::StatusOr<NcclApi> LoadNcclFrom(const std::vector<std::string>& patterns,
                                     std::string_view hint = "");

// What a failed search under `env` advises: set TANDEM_NCCL_LIB, or, when it is set, that nothing
// else was searched.
std::string NcclSearchHint(const NcclSearchEnv& env);

// LoadNcclFrom(NcclSearchPatterns(env), NcclSearchHint(env)).
absl::StatusOr<NcclApi> SearchNccl(const NcclSearchEnv& env);

// SearchNccl(NcclSearchEnvFromProcess()) once per process; later calls return the same result.
// Thread-safe; the library stays loaded.
absl::StatusOr<const NcclApi*> LoadNccl();

// "2.28.9" from an ncclGetVersion code (major*10000 + minor*100 + patch since NCCL 2.9,
// major*1000 + minor*100 + patch before).
std::string NcclVersionString(int code);

}  // namespace tandem

#endif  // TANDEM_COMMON_TRANSPORT_CUDA_NCCL_API_H_
