// What tandem-cluster is asked to run; filled from flags in main.cc. Unset optional fields are
// not passed to the servers, so each server's own default applies.
#ifndef TANDEM_TOOLS_CLUSTER_CLUSTER_OPTIONS_H_
#define TANDEM_TOOLS_CLUSTER_CLUSTER_OPTIONS_H_

#include <optional>
#include <string>
#include <vector>

namespace tandem {

struct ClusterOptions {
  std::string model_dir;
  // Unset: 2 in disaggregated mode, 0 in colocated and auto mode.
  std::optional<int> num_prefill;
  int num_decode = 2;
  // Or "colocated", or "auto" (decode nodes that also prefill for each other: --serve-prefill).
  std::string mode = "disaggregated";
  std::optional<std::string> policy;  // round_robin | least_loaded | prefix_aware | cost
  std::string router_listen = "127.0.0.1:0";
  // UCX_TLS for the children. Unset: they inherit the launcher's environment.
  std::optional<std::string> ucx_tls;

  // Node settings.
  std::optional<int> threads_per_node;
  std::optional<int> kv_cache_mb;
  std::optional<int> block_size;
  std::optional<std::string> kv_cache_dtype;  // auto | f32 | bf16 | fp8_e4m3, every node
  std::optional<int> max_num_batched_tokens;
  std::optional<int> max_num_seqs;
  std::optional<int> lease_ms;  // decode nodes and router
  // Router settings.
  std::optional<int> local_prefill_threshold;
  std::optional<int> max_retries;
  // Extra arguments appended verbatim, one per flag occurrence.
  std::vector<std::string> router_args;
  std::vector<std::string> prefill_args;
  std::vector<std::string> decode_args;

  std::string bin_dir;     // "": the directory of the tandem-cluster executable
  std::string log_dir;     // "": a fresh temp dir, printed
  std::string ready_file;  // "": none; else the cluster's endpoints as JSON once ready
  // --tls: a throwaway CA and certificates; the router's API over TLS, mTLS between processes.
  bool tls = false;

  // --prompt: once ready, stream one completion through the router, then stop.
  std::optional<std::string> prompt;
  int max_tokens = 16;
  std::optional<float> temperature;

  int startup_timeout_s = 120;
  int stop_grace_ms = 10000;
};

}  // namespace tandem

#endif  // TANDEM_TOOLS_CLUSTER_CLUSTER_OPTIONS_H_
