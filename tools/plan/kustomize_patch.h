// A planned configuration as a Kustomize overlay of tandem's Kubernetes base (deploy/k8s): one
// kustomization.yaml that takes the base and sets the prefill and decode Deployments' replicas,
// their engine flags (--max-num-batched-tokens, --max-num-seqs, --block-size) and GPUs per pod
// (the tensor-parallel size), and the router's --mode, --policy, --local-prefill-threshold and
// --health-interval-ms (with the cost policy also what its model predicts against:
// --slo-ttft-ms, --slo-tpot-ms, and for handoffs --kv-link-gbps, --disaggregation-hop-us), as
// JSON 6902 patches in the style of deploy/k8s/overlays/gpu. A
// colocated plan scales tandem-prefill to 0 and removes the router's --prefill-dns (the router
// refuses it in colocated mode), guarded by a `test` op so a base with other args fails to build
// instead of losing the wrong one.
#ifndef TANDEM_TOOLS_PLAN_KUSTOMIZE_PATCH_H_
#define TANDEM_TOOLS_PLAN_KUSTOMIZE_PATCH_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "tools/plan/plan_config.h"

namespace tandem::plan {

struct KustomizeOptions {
  std::string base = "../../base";  // the resource, relative to the overlay's folder
  // The engine and router settings the plan was simulated with (the binaries' defaults differ:
  // the nodes run 64 sequences unless told).
  int32_t max_num_seqs = 256;
  int32_t block_size = 16;
  bool prefix_caching = true;
  int64_t load_poll_ms = 500;  // the router's --health-interval-ms
  // The cost policy's inputs as the simulated routers had them (sim_cluster.cc): the targets it
  // predicts against, the KV link's rate and the handoff's extra hops. The router's defaults
  // (2 s, 100 ms, no link) would place differently from the plan.
  double slo_ttft_ms = 2000;
  double slo_tpot_ms = 100;
  double kv_link_gbps = 0;
  double disaggregation_hop_us = 0;
  // The draft model the plan priced (--sim-draft-model): a directory is passed to the decode pods
  // as --draft-model=DIR; a preset NAME as --draft-model=/models/NAME, where the pods must mount
  // it. Empty: drafts by prompt lookup (--speculative=ngram).
  std::string draft_model;
  // Colocated and auto: the router's --prefill-dns=... is args[prefill_dns_arg_index] (the
  // repository's base: 5; WriteKustomization reads the base's router.yaml when it can).
  int prefill_dns_arg_index = 5;
  std::string prefill_dns_arg = "--prefill-dns=tandem-prefill:50071";
  std::vector<std::string> comment;  // lines at the top, each written as "# line"
};

// The kustomization.yaml text.
std::string RenderKustomization(const PlanConfig& config, const KustomizeOptions& options);

// The item of the first `args:` list of `manifest` (YAML text: a Deployment's) that starts with
// `prefix`: its index and its text; nullopt when the list has none. Comment lines are skipped.
struct ArgItem {
  int index = 0;
  std::string text;
};
std::optional<ArgItem> FindArg(std::string_view manifest, std::string_view prefix);

// Creates `dir` and writes dir/kustomization.yaml. For a colocated plan, when
// dir/options.base/router.yaml can be read, the --prefill-dns arg's index and text come from it
// (none there: nothing to remove). Internal error when the file cannot be written.
absl::Status WriteKustomization(const std::string& dir, const PlanConfig& config,
                                KustomizeOptions options);

}  // namespace tandem::plan

#endif  // TANDEM_TOOLS_PLAN_KUSTOMIZE_PATCH_H_
