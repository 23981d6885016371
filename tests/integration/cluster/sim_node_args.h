// The node arguments of the integration tests that run sim-backend nodes: Llama-3.1-8B on an H100,
// modelled (a 2,000-token prompt takes about 50 ms of prefill); the KV pool holds 1/128 of each
// token's real bytes, `kv_blocks` blocks per node.
#ifndef TANDEM_TESTS_INTEGRATION_CLUSTER_SIM_NODE_ARGS_H_
#define TANDEM_TESTS_INTEGRATION_CLUSTER_SIM_NODE_ARGS_H_

#include <string>
#include <vector>

namespace tandem::testing {

inline std::vector<std::string> SimNodeArgs(int kv_blocks) {
  return {"--backend",
          "sim",
          "--sim-model",
          "llama-3.1-8b",
          "--sim-gpu",
          "h100",
          "--sim-kv-scale",
          "128",
          "--sim-kv-blocks",
          std::to_string(kv_blocks),
          "--max-num-batched-tokens",
          "2048"};
}

}  // namespace tandem::testing

#endif  // TANDEM_TESTS_INTEGRATION_CLUSTER_SIM_NODE_ARGS_H_
