#include "tools/plan/kustomize_patch.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"

namespace tandem::plan {
namespace {

constexpr char kArgs[] = "/spec/template/spec/containers/0/args";
constexpr char kResources[] = "/spec/template/spec/containers/0/resources";

// One JSON 6902 operation, indented as an item of a `patch: |-` block.
std::string Op(const std::string& op, const std::string& path, const std::string& value) {
  return absl::StrCat("      - op: ", op, "\n        path: ", path, "\n        value: ", value,
                      "\n");
}
std::string AddArg(const std::string& arg) { return Op("add", absl::StrCat(kArgs, "/-"), arg); }

std::string Patch(const std::string& deployment, const std::string& ops) {
  return absl::StrCat("  - target:\n      kind: Deployment\n      name: ", deployment,
                      "\n    patch: |-\n", ops);
}

// A node pool's engine flags and GPUs per pod; `decodes`: the pool that decodes (speculation).
std::string NodeOps(const PlanConfig& config, int tp, bool decodes, const KustomizeOptions& o) {
  std::string ops =
      AddArg(absl::StrCat("--max-num-batched-tokens=", config.max_num_batched_tokens));
  absl::StrAppend(&ops, AddArg(absl::StrCat("--max-num-seqs=", o.max_num_seqs)));
  absl::StrAppend(&ops, AddArg(absl::StrCat("--block-size=", o.block_size)));
  if (!o.prefix_caching) absl::StrAppend(&ops, AddArg("--no-prefix-caching"));
  if (decodes && config.num_speculative_tokens > 0) {
    // The plan priced drafts at an acceptance rate: from the draft model it priced, or else by
    // prompt lookup, the method that needs no model.
    if (o.draft_model.empty()) {
      absl::StrAppend(&ops, AddArg("--speculative=ngram"));
    } else {
      const bool dir = o.draft_model.find('/') != std::string::npos;
      absl::StrAppend(&ops,
                      AddArg(absl::StrCat("--draft-model=", dir ? "" : "/models/", o.draft_model)));
    }
    absl::StrAppend(
        &ops, AddArg(absl::StrCat("--num-speculative-tokens=", config.num_speculative_tokens)));
  }
  for (const char* kind : {"requests", "limits"}) {
    absl::StrAppend(&ops, Op("add", absl::StrCat(kResources, "/", kind, "/nvidia.com~1gpu"),
                             absl::StrCat("\"", tp, "\"")));
  }
  return ops;
}

}  // namespace

std::string RenderKustomization(const PlanConfig& config, const KustomizeOptions& o) {
  const bool auto_mode = config.mode == ServingMode::kAuto;
  // Colocated and auto clusters run no prefill nodes.
  const bool prefill_pool = config.mode == ServingMode::kDisaggregated;
  std::string out;
  for (const std::string& line : o.comment) absl::StrAppend(&out, "# ", line, "\n");
  absl::StrAppend(&out,
                  "apiVersion: kustomize.config.k8s.io/v1beta1\n"
                  "kind: Kustomization\n"
                  "resources:\n  - ",
                  o.base, "\n");
  absl::StrAppend(&out, "replicas:\n  - name: tandem-prefill\n    count: ",
                  prefill_pool ? config.num_prefill : 0,
                  "\n  - name: tandem-decode\n    count: ", config.num_decode, "\npatches:\n");

  std::string router;
  if (!prefill_pool && !o.prefill_dns_arg.empty()) {
    const std::string path = absl::StrCat(kArgs, "/", o.prefill_dns_arg_index);
    absl::StrAppend(&router, Op("test", path, o.prefill_dns_arg), "      - op: remove\n",
                    "        path: ", path, "\n");
  }
  absl::StrAppend(&router,
                  AddArg(absl::StrCat("--mode=", std::string(ServingModeName(config.mode)))));
  absl::StrAppend(
      &router, AddArg(absl::StrCat("--policy=", std::string(PlacementPolicyName(config.policy)))));
  if (config.policy == PlacementPolicy::kCost) {
    absl::StrAppend(&router, AddArg(absl::StrCat("--slo-ttft-ms=", o.slo_ttft_ms)),
                    AddArg(absl::StrCat("--slo-tpot-ms=", o.slo_tpot_ms)));
    if (config.mode != ServingMode::kColocated) {
      absl::StrAppend(&router, AddArg(absl::StrCat("--kv-link-gbps=", o.kv_link_gbps)),
                      AddArg(absl::StrCat("--disaggregation-hop-us=", o.disaggregation_hop_us)));
    }
  }
  if (HasLocalPrefillThreshold(config.mode)) {
    absl::StrAppend(&router, AddArg(absl::StrCat("--local-prefill-threshold=",
                                                 config.local_prefill_threshold)));
  }
  absl::StrAppend(&router, AddArg(absl::StrCat("--health-interval-ms=", o.load_poll_ms)));
  absl::StrAppend(&out, Patch("tandem-router", router));
  if (prefill_pool) {
    absl::StrAppend(
        &out, Patch("tandem-prefill", NodeOps(config, config.prefill_tp, /*decodes=*/false, o)));
  }
  std::string decode = NodeOps(config, config.decode_tp, /*decodes=*/true, o);
  if (auto_mode) absl::StrAppend(&decode, AddArg("--serve-prefill"));  // prefills for the others
  absl::StrAppend(&out, Patch("tandem-decode", decode));
  return out;
}

std::optional<ArgItem> FindArg(std::string_view manifest, std::string_view prefix) {
  std::optional<size_t> list_indent;  // of the `args:` key, once found
  int index = 0;
  while (!manifest.empty()) {
    const size_t eol = std::min(manifest.find('\n'), manifest.size());
    const std::string_view line = manifest.substr(0, eol);
    manifest.remove_prefix(std::min(eol + 1, manifest.size()));
    const size_t indent = line.find_first_not_of(' ');
    if (indent == std::string_view::npos) continue;
    std::string_view text = line.substr(indent);
    if (text.starts_with("#")) continue;
    if (!list_indent.has_value()) {
      if (text == "args:") list_indent = indent;
      continue;
    }
    if (indent < *list_indent || (indent == *list_indent && !text.starts_with("- "))) {
      return std::nullopt;  // the list ended
    }
    if (!text.starts_with("- ")) continue;  // a continuation line
    text.remove_prefix(2);
    if (text.starts_with(prefix)) {
      while (!text.empty() && (text.back() == ' ' || text.back() == '\r')) text.remove_suffix(1);
      return ArgItem{index, std::string(text)};
    }
    ++index;
  }
  return std::nullopt;
}

absl::Status WriteKustomization(const std::string& dir, const PlanConfig& config,
                                KustomizeOptions options) {
  namespace fs = std::filesystem;
  std::error_code error;
  fs::create_directories(dir, error);
  if (error) {
    return absl::InternalError(absl::StrCat("cannot create ", dir, ": ", error.message()));
  }
  if (config.mode != ServingMode::kDisaggregated) {
    std::ifstream router(fs::path(dir) / options.base / "router.yaml");
    if (router) {
      std::stringstream text;
      text << router.rdbuf();
      const std::optional<ArgItem> arg = FindArg(text.str(), "--prefill-dns");
      options.prefill_dns_arg = arg.has_value() ? arg->text : "";  // none: nothing to remove
      if (arg.has_value()) options.prefill_dns_arg_index = arg->index;
    }
  }
  const fs::path path = fs::path(dir) / "kustomization.yaml";
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << RenderKustomization(config, options);
  out.close();
  if (!out) return absl::InternalError(absl::StrCat("cannot write ", path.string()));
  return absl::OkStatus();
}

}  // namespace tandem::plan
