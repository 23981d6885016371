#include "tools/cluster/cluster_plan.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace tandem {
namespace {

void AddOptional(std::vector<std::string>* args, const char* flag, const std::optional<int>& v) {
  if (v.has_value()) {
    args->push_back(flag);
    args->push_back(std::to_string(*v));
  }
}

std::vector<std::pair<std::string, std::string>> ChildEnv(const ClusterOptions& options) {
  std::vector<std::pair<std::string, std::string>> env;
  if (options.ucx_tls.has_value()) env.emplace_back("UCX_TLS", *options.ucx_tls);
  return env;
}

ProcessPlan PlanProcess(ClusterRole role, const std::string& name, const ClusterDirs& dirs) {
  ProcessPlan plan;
  plan.role = role;
  plan.name = name;
  plan.ready_file = absl::StrCat(dirs.ready_dir, "/", name, ".ready.json");
  plan.spec.binary = absl::StrCat(dirs.bin_dir, "/", RoleBinary(role));
  plan.spec.stdout_path = absl::StrCat(dirs.log_dir, "/", name, ".log");
  plan.spec.die_with_parent = true;
  plan.spec.own_process_group = true;
  return plan;
}

ProcessPlan PlanNode(const ClusterOptions& options, const ClusterDirs& dirs, ClusterRole role,
                     int index) {
  ProcessPlan plan = PlanProcess(role, absl::StrCat(RoleName(role), "-", index), dirs);
  std::vector<std::string>& args = plan.spec.args;
  args = {"--model",       options.model_dir,  "--listen",    "127.0.0.1:0", "--ready-file",
          plan.ready_file, "--metrics-listen", "127.0.0.1:0", "--node-id",   plan.name};
  AddOptional(&args, "--threads", options.threads_per_node);
  AddOptional(&args, "--kv-cache-mb", options.kv_cache_mb);
  AddOptional(&args, "--block-size", options.block_size);
  if (options.kv_cache_dtype.has_value()) {
    args.insert(args.end(), {"--kv-cache-dtype", *options.kv_cache_dtype});
  }
  AddOptional(&args, "--max-num-batched-tokens", options.max_num_batched_tokens);
  AddOptional(&args, "--max-num-seqs", options.max_num_seqs);
  if (role == ClusterRole::kDecode) AddOptional(&args, "--lease-ms", options.lease_ms);
  // Auto mode: every decode node also prefills for the others.
  const bool serve_prefill = role == ClusterRole::kDecode && options.mode == "auto";
  if (serve_prefill) args.push_back("--serve-prefill");
  if (!dirs.secret_file.empty()) {
    args.insert(args.end(), {"--cluster-secret-file", dirs.secret_file});
  }
  if (!dirs.tls.ca_cert.empty()) {
    // Nodes serve mTLS with the shared node certificate; a prefill node (or a decode node that
    // prefills for others) also dials decode nodes (ConnectKv) with it.
    args.insert(args.end(), {"--tls-cert", dirs.tls.node_cert, "--tls-key", dirs.tls.node_key,
                             "--tls-client-ca", dirs.tls.ca_cert});
    if (role == ClusterRole::kPrefill || serve_prefill) {
      args.insert(args.end(), {"--node-tls-ca", dirs.tls.ca_cert, "--node-tls-cert",
                               dirs.tls.node_cert, "--node-tls-key", dirs.tls.node_key});
    }
  }
  const std::vector<std::string>& extra =
      role == ClusterRole::kPrefill ? options.prefill_args : options.decode_args;
  args.insert(args.end(), extra.begin(), extra.end());
  plan.spec.env = ChildEnv(options);
  return plan;
}

bool OneOf(const std::string& value, std::initializer_list<const char*> allowed) {
  for (const char* a : allowed) {
    if (value == a) return true;
  }
  return false;
}

}  // namespace

const char* RoleName(ClusterRole role) {
  switch (role) {
    case ClusterRole::kPrefill:
      return "prefill";
    case ClusterRole::kDecode:
      return "decode";
    case ClusterRole::kRouter:
      return "router";
  }
  return "?";
}

const char* RoleBinary(ClusterRole role) {
  switch (role) {
    case ClusterRole::kPrefill:
      return "tandem-prefill";
    case ClusterRole::kDecode:
      return "tandem-decode";
    case ClusterRole::kRouter:
      return "tandem-router";
  }
  return "?";
}

int NumPrefillNodes(const ClusterOptions& options) {
  if (options.num_prefill.has_value()) return *options.num_prefill;
  return options.mode == "disaggregated" ? 2 : 0;
}

std::string ValidateClusterOptions(const ClusterOptions& options) {
  constexpr int kMaxNodes = 64;
  if (options.model_dir.empty()) return "--model DIR is required";
  if (!OneOf(options.mode, {"disaggregated", "colocated", "auto"})) {
    return absl::StrCat("--mode expects disaggregated, colocated or auto, got '", options.mode,
                        "'");
  }
  if (options.policy.has_value() &&
      !OneOf(*options.policy, {"round_robin", "least_loaded", "prefix_aware", "cost"})) {
    return absl::StrCat("--policy expects round_robin, least_loaded, prefix_aware or cost, got '",
                        *options.policy, "'");
  }
  int prefill = NumPrefillNodes(options);
  if (prefill < 0 || prefill > kMaxNodes) {
    return absl::StrCat("--prefill must be between 0 and ", kMaxNodes);
  }
  if (options.num_decode < 1 || options.num_decode > kMaxNodes) {
    return absl::StrCat("--decode must be between 1 and ", kMaxNodes);
  }
  if (options.mode == "auto" && prefill > 0) {
    return "--mode auto runs no prefill nodes (every decode node prefills for the others): drop "
           "--prefill";
  }
  if (options.mode == "disaggregated" && prefill < 1) {
    return "--mode disaggregated needs at least one prefill node (--prefill N, N >= 1)";
  }
  if (options.router_listen.find(':') == std::string::npos) {
    return absl::StrCat("--listen expects HOST:PORT, got '", options.router_listen, "'");
  }
  if (options.ucx_tls.has_value() && options.ucx_tls->empty()) {
    return "--ucx-tls needs a transport list (e.g. tcp, sm, posix,sysv,self)";
  }
  struct Positive {
    const char* flag;
    const std::optional<int>& value;
  };
  for (const Positive& p : {Positive{"--threads-per-node", options.threads_per_node},
                            Positive{"--kv-cache-mb", options.kv_cache_mb},
                            Positive{"--block-size", options.block_size},
                            Positive{"--max-num-batched-tokens", options.max_num_batched_tokens},
                            Positive{"--max-num-seqs", options.max_num_seqs},
                            Positive{"--lease-ms", options.lease_ms}}) {
    if (p.value.has_value() && *p.value < 1) return absl::StrCat(p.flag, " must be >= 1");
  }
  if (options.local_prefill_threshold.has_value() && *options.local_prefill_threshold < 0) {
    return "--local-prefill-threshold must be >= 0";
  }
  if (options.max_retries.has_value() && *options.max_retries < 0) {
    return "--max-retries must be >= 0";
  }
  if (options.max_tokens < 1) return "--max-tokens must be >= 1";
  if (options.temperature.has_value() && *options.temperature < 0) {
    return "--temperature must be >= 0";
  }
  if (options.startup_timeout_s < 1) return "--startup-timeout-s must be >= 1";
  if (options.stop_grace_ms < 0) return "--stop-grace-ms must be >= 0";
  return "";
}

std::vector<ProcessPlan> PlanNodes(const ClusterOptions& options, const ClusterDirs& dirs) {
  std::vector<ProcessPlan> plans;
  for (int i = 0; i < NumPrefillNodes(options); ++i) {
    plans.push_back(PlanNode(options, dirs, ClusterRole::kPrefill, i));
  }
  for (int i = 0; i < options.num_decode; ++i) {
    plans.push_back(PlanNode(options, dirs, ClusterRole::kDecode, i));
  }
  return plans;
}

ProcessPlan PlanRouter(const ClusterOptions& options, const ClusterDirs& dirs,
                       const std::vector<std::string>& prefill_addresses,
                       const std::vector<std::string>& decode_addresses) {
  ProcessPlan plan = PlanProcess(ClusterRole::kRouter, "router", dirs);
  std::vector<std::string>& args = plan.spec.args;
  args = {"--model",       options.model_dir, "--listen",    options.router_listen, "--ready-file",
          plan.ready_file, "--http-listen",   "127.0.0.1:0", "--metrics-listen",    "127.0.0.1:0"};
  if (!prefill_addresses.empty()) {
    args.push_back("--prefill");
    args.push_back(absl::StrJoin(prefill_addresses, ","));
  }
  args.push_back("--decode");
  args.push_back(absl::StrJoin(decode_addresses, ","));
  args.push_back("--mode");
  args.push_back(options.mode);
  if (options.policy.has_value()) {
    args.push_back("--policy");
    args.push_back(*options.policy);
  }
  AddOptional(&args, "--local-prefill-threshold", options.local_prefill_threshold);
  AddOptional(&args, "--max-retries", options.max_retries);
  AddOptional(&args, "--lease-ms", options.lease_ms);
  if (!dirs.tls.ca_cert.empty()) {
    args.insert(args.end(), {"--tls-cert", dirs.tls.router_cert, "--tls-key", dirs.tls.router_key,
                             "--node-tls-ca", dirs.tls.ca_cert, "--node-tls-cert",
                             dirs.tls.node_cert, "--node-tls-key", dirs.tls.node_key});
  }
  args.insert(args.end(), options.router_args.begin(), options.router_args.end());
  plan.spec.env = ChildEnv(options);
  return plan;
}

}  // namespace tandem
