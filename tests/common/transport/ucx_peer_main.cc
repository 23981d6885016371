// A second process for the UCX transport tests: the owner side of a transfer.
//
//   tandem_ucx_peer --tls TLS --pool-bytes N [--allocate] [--stuck]
//
// Prints "READY <hex address> <hex remote key> <pool base>" once its pool is registered. On each
// notice it prints "NOTICE <hex payload> <fnv1a of the whole pool>". Reads commands from stdin:
// "HASH" prints "HASH <fnv1a>"; "EXIT" or end of input exits.
//
// --stuck: a raw UCP worker that publishes its pool and then never progresses (a hung peer).
#include <ucp/api/ucp.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "common/transport/ucx_transport.h"
#include "tests/common/transport/transport_test_util.h"

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

int RunStuck(const std::string& tls, size_t pool_bytes) {
  ucp_config_t* config = nullptr;
  if (ucp_config_read(nullptr, nullptr, &config) != UCS_OK) return 2;
  if (!tls.empty()) ucp_config_modify(config, "TLS", tls.c_str());
  ucp_params_t params{};
  params.field_mask = UCP_PARAM_FIELD_FEATURES;
  params.features = UCP_FEATURE_RMA | UCP_FEATURE_AM;
  ucp_context_h context;
  if (ucp_init(&params, config, &context) != UCS_OK) return 2;
  ucp_config_release(config);
  ucp_worker_params_t wp{};
  wp.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
  wp.thread_mode = UCS_THREAD_MODE_SINGLE;
  ucp_worker_h worker;
  if (ucp_worker_create(context, &wp, &worker) != UCS_OK) return 2;
  std::vector<char> pool(pool_bytes);
  ucp_mem_map_params_t mp{};
  mp.field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH;
  mp.address = pool.data();
  mp.length = pool.size();
  ucp_mem_h memh;
  if (ucp_mem_map(context, &mp, &memh) != UCS_OK) return 2;
  void* rkey = nullptr;
  size_t rkey_len = 0;
  ucp_rkey_pack(context, memh, &rkey, &rkey_len);
  ucp_address_t* addr = nullptr;
  size_t addr_len = 0;
  ucp_worker_get_address(worker, &addr, &addr_len);
  PrintLine("READY " +
            tandem::testing::ToHex(std::string(reinterpret_cast<char*>(addr), addr_len)) + " " +
            tandem::testing::ToHex(std::string(static_cast<char*>(rkey), rkey_len)) + " " +
            std::to_string(reinterpret_cast<uintptr_t>(pool.data())));
  std::string line;
  while (std::getline(std::cin, line) && line != "EXIT") {
  }
  std::_Exit(0);  // never progressed, never cleaned up: a hung peer
}

}  // namespace

int main(int argc, char** argv) {
  std::string tls;
  size_t pool_bytes = 1 << 20;
  bool allocate = false;
  bool stuck = false;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--tls" && i + 1 < argc) {
      tls = argv[++i];
    } else if (a == "--pool-bytes" && i + 1 < argc) {
      pool_bytes = std::stoull(argv[++i]);
    } else if (a == "--allocate") {
      allocate = true;
    } else if (a == "--stuck") {
      stuck = true;
    } else {
      std::cerr << "unknown argument " << a << "\n";
      return 2;
    }
  }
  if (stuck) return RunStuck(tls, pool_bytes);

  tandem::UcxTransportOptions options;
  options.tls = tls;
  auto transport = tandem::UcxTransport::Create(options);
  if (!transport.ok()) {
    std::cerr << transport.status() << "\n";
    return 1;
  }
  std::vector<char> owned;
  char* pool = nullptr;
  if (allocate) {
    auto p = (*transport)->AllocatePool(pool_bytes);
    if (!p.ok()) {
      std::cerr << p.status() << "\n";
      return 1;
    }
    pool = static_cast<char*>(*p);
  } else {
    owned.assign(pool_bytes, 0);
    pool = owned.data();
    absl::Status s = (*transport)->RegisterPool(pool, pool_bytes);
    if (!s.ok()) {
      std::cerr << s << "\n";
      return 1;
    }
  }
  (*transport)->SetNoticeHandler([pool, pool_bytes](std::string_view payload) {
    PrintLine("NOTICE " + tandem::testing::ToHex(std::string(payload)) + " " +
              std::to_string(tandem::testing::Fnv1a(pool, pool_bytes)));
  });
  PrintLine("READY " + tandem::testing::ToHex((*transport)->address()) + " " +
            tandem::testing::ToHex((*transport)->pool_remote_key()) + " " +
            std::to_string((*transport)->pool_base()));
  std::string line;
  while (std::getline(std::cin, line)) {
    if (line == "EXIT") break;
    if (line == "HASH") {
      PrintLine("HASH " + std::to_string(tandem::testing::Fnv1a(pool, pool_bytes)));
    }
  }
  transport->reset();
  return 0;
}
