#include "bench/chaos/chaos_options.h"

#include "absl/strings/str_cat.h"
#include "bench/chaos/fault_plan.h"

namespace tandem::chaos {

std::string ValidateChaosOptions(const ChaosOptions& o) {
  if (o.model_dir.empty()) return "--model DIR is required";
  if (o.backend != "sim" && o.backend != "cpu") {
    return absl::StrCat("--backend expects sim or cpu, got '", o.backend, "'");
  }
  if (o.num_prefill < 1 || o.num_decode < 1 || o.num_prefill + o.num_decode > 16) {
    return "--prefill and --decode must be >= 1 (at most 16 nodes in all)";
  }
  if (!(o.duration_s > 0) || !(o.rate > 0) || o.rate * o.duration_s > 1e6) {
    return "--duration-s and --rate must be positive (at most 10^6 requests)";
  }
  if (o.num_prompts < 1 || o.min_prompt_len < 1 || o.max_prompt_len < o.min_prompt_len) {
    return "--num-prompts, --min-prompt-len must be >= 1 and --max-prompt-len >= --min-prompt-len";
  }
  if (o.max_tokens < 1) return "--max-tokens must be >= 1";
  if (!ParseFaultKinds(o.faults).has_value()) {
    return absl::StrCat(
        "--faults expects a comma-separated list of kill, stop, term, netcut; got '", o.faults,
        "'");
  }
  if (!(o.fault_interval_s > 0)) return "--fault-interval-s must be positive";
  if (o.min_hold_s < 0 || o.max_hold_s < o.min_hold_s) {
    return "--min-hold-s must be >= 0 and --max-hold-s >= --min-hold-s";
  }
  if (o.request_timeout_ms < 1 || o.lease_ms < 1 || o.node_drain_ms < 0) {
    return "--request-timeout-ms and --lease-ms must be >= 1, --node-drain-ms >= 0";
  }
  if (!(o.lost_grace_s > 0) || !(o.settle_s >= 0) || !(o.sample_interval_s > 0)) {
    return "--lost-grace-s and --sample-interval-s must be positive, --settle-s >= 0";
  }
  if (!(o.sim_time_scale > 0) || o.sim_kv_blocks < 1 || o.node_threads < 1) {
    return "--sim-time-scale, --sim-kv-blocks and --node-threads must be positive";
  }
  if (o.startup_timeout_s < 1) return "--startup-timeout-s must be >= 1";
  return "";
}

}  // namespace tandem::chaos
