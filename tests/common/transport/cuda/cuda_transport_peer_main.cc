// A second process for the device-pool transport tests: the owner side of a CudaKvTransport.
//
//   tandem_cuda_transport_peer --copier host|cuda [--device N] [--tls TLS] --pool-bytes N
//       [--shared] [--chunk-bytes N] [--landing-slots N]
//
// --copier host: the pool is host memory (a SharedHostPool with --shared, which same-host
// writers open directly; plain memory without, so writers stage). --copier cuda (builds with
// CUDA only): the pool is cudaMalloc'd on --device and exported with cudaIpcGetMemHandle.
//
// Prints "READY <hex address> <hex remote key> <pool base>" once registered, then on each notice
// "NOTICE <hex payload> <fnv1a of the whole pool>". Reads commands from stdin: "HASH" prints
// "HASH <fnv1a>"; "EXIT" or end of input exits.
#include <cstdint>
#include <functional>
#include <iostream>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "common/transport/cuda/cuda_kv_transport.h"
#include "common/transport/cuda/host_memory_copier.h"
#include "common/transport/ucx_transport.h"
#include "spdlog/sinks/stdout_color_sinks.h"
#include "spdlog/spdlog.h"
#include "tests/common/transport/transport_test_util.h"
#ifdef TANDEM_PEER_WITH_CUDA
#include <cuda_runtime_api.h>

#include "common/transport/cuda/cuda_memory_copier.h"
#endif

// UCX 1.13 keeps a few small allocations of its transport lists until exit; they are not ours.
extern "C" const char* __lsan_default_suppressions() {
  return "leak:libuct.so\nleak:libucs.so\nleak:libucp.so\n";
}

namespace {

std::mutex out_mu;

void PrintLine(const std::string& line) {
  std::lock_guard<std::mutex> lock(out_mu);
  std::cout << line << std::endl;
}

}  // namespace

int main(int argc, char** argv) {
  // stdout carries the protocol lines; logs go to stderr.
  spdlog::set_default_logger(spdlog::stderr_color_mt("peer"));
  std::string copier_kind = "host";
  std::string tls = "tcp";
  int device = 0;
  size_t pool_bytes = 1 << 20;
  bool shared = false;
  tandem::CudaKvTransportOptions options;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> std::string { return i + 1 < argc ? argv[++i] : ""; };
    if (a == "--copier") {
      copier_kind = next();
    } else if (a == "--tls") {
      tls = next();
    } else if (a == "--device") {
      device = std::stoi(next());
    } else if (a == "--pool-bytes") {
      pool_bytes = std::stoull(next());
    } else if (a == "--shared") {
      shared = true;
    } else if (a == "--chunk-bytes") {
      options.chunk_bytes = std::stoull(next());
    } else if (a == "--landing-slots") {
      options.landing_slots = std::stoi(next());
    } else if (a == "--help") {
      std::cout << "tandem_cuda_transport_peer --copier host|cuda [--device N] [--tls TLS] "
                   "--pool-bytes N [--shared] [--chunk-bytes N] [--landing-slots N]\n"
                   "The owner side of a CudaKvTransport, for the transport tests.\n";
      return 0;
    } else {
      std::cerr << "unknown argument " << a << "\n";
      return 2;
    }
  }

  std::unique_ptr<tandem::MemoryCopier> copier;
  std::unique_ptr<tandem::SharedHostPool> shared_pool;
  std::vector<char> plain_pool;
  char* pool = nullptr;
  std::function<uint64_t()> hash;
  if (copier_kind == "host") {
    copier = std::make_unique<tandem::HostMemoryCopier>();
    if (shared) {
      auto p = tandem::SharedHostPool::Create(pool_bytes);
      if (!p.ok()) {
        std::cerr << p.status() << "\n";
        return 1;
      }
      shared_pool = std::move(*p);
      pool = shared_pool->data();
    } else {
      plain_pool.assign(pool_bytes, 0);
      pool = plain_pool.data();
    }
    hash = [pool, pool_bytes] { return tandem::testing::Fnv1a(pool, pool_bytes); };
  } else if (copier_kind == "cuda") {
#ifdef TANDEM_PEER_WITH_CUDA
    auto c = tandem::CudaMemoryCopier::Create(device);
    if (!c.ok()) {
      std::cerr << c.status() << "\n";
      return 1;
    }
    copier = std::move(*c);
    void* p = nullptr;
    if (cudaSetDevice(device) != cudaSuccess || cudaMalloc(&p, pool_bytes) != cudaSuccess ||
        cudaMemset(p, 0, pool_bytes) != cudaSuccess || cudaDeviceSynchronize() != cudaSuccess) {
      std::cerr << "cuda pool allocation failed\n";
      return 1;
    }
    pool = static_cast<char*>(p);
    hash = [pool, pool_bytes, device] {
      std::vector<char> host(pool_bytes);
      cudaSetDevice(device);
      if (cudaMemcpy(host.data(), pool, pool_bytes, cudaMemcpyDeviceToHost) != cudaSuccess) {
        return uint64_t{0};
      }
      return tandem::testing::Fnv1a(host.data(), pool_bytes);
    };
#else
    std::cerr << "built without CUDA\n";
    return 2;
#endif
  } else {
    std::cerr << "unknown copier " << copier_kind << "\n";
    return 2;
  }

  tandem::UcxTransportOptions ucx;
  ucx.tls = tls;
  auto inner = tandem::UcxTransport::Create(ucx);
  if (!inner.ok()) {
    std::cerr << inner.status() << "\n";
    return 1;
  }
  auto transport = tandem::CudaKvTransport::Create(std::move(*inner), std::move(copier), options);
  if (!transport.ok()) {
    std::cerr << transport.status() << "\n";
    return 1;
  }
  absl::Status s = (*transport)->RegisterDevicePool(pool, pool_bytes, device);
  if (!s.ok()) {
    std::cerr << s << "\n";
    return 1;
  }
  (*transport)->SetNoticeHandler([&hash](std::string_view payload) {
    PrintLine("NOTICE " + tandem::testing::ToHex(std::string(payload)) + " " +
              std::to_string(hash()));
  });
  PrintLine("READY " + tandem::testing::ToHex((*transport)->address()) + " " +
            tandem::testing::ToHex((*transport)->pool_remote_key()) + " " +
            std::to_string((*transport)->pool_base()));
  std::string line;
  while (std::getline(std::cin, line)) {
    if (line == "EXIT") break;
    if (line == "HASH") PrintLine("HASH " + std::to_string(hash()));
  }
  transport->reset();
#ifdef TANDEM_PEER_WITH_CUDA
  if (copier_kind == "cuda") cudaFree(pool);
#endif
  return 0;
}
