// The Kustomize overlay of a plan, parsed back: replicas, the router's and each pool's patch
// operations; the colocated plan's removal of the router's --prefill-dns, found in the
// repository's own base; and, when kubectl is installed, the overlay built against that base.
#include "tools/plan/kustomize_patch.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tandem::plan {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

struct PatchOp {
  std::string op, path, value;
  bool operator==(const PatchOp&) const = default;
};

// What a rendered kustomization.yaml says, read back line by line (the renderer's own layout).
struct Overlay {
  std::vector<std::string> resources;
  std::map<std::string, int> replicas;
  std::map<std::string, std::vector<PatchOp>> patches;  // by target Deployment
};

std::string After(const std::string& line, const std::string& key) {
  const size_t at = line.find(key);
  return at == std::string::npos ? "" : line.substr(at + key.size());
}

Overlay Parse(const std::string& yaml) {
  Overlay o;
  std::istringstream in(yaml);
  std::string line, section, replica_name, target;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    if (line[0] != ' ') {
      section = line.substr(0, line.find(':'));
      continue;
    }
    if (section == "resources") {
      o.resources.push_back(After(line, "- "));
    } else if (section == "replicas") {
      if (line.find("- name: ") != std::string::npos) replica_name = After(line, "- name: ");
      if (line.find("count: ") != std::string::npos) {
        o.replicas[replica_name] = std::stoi(After(line, "count: "));
      }
    } else if (section == "patches") {
      if (line.rfind("      name: ", 0) == 0) target = After(line, "name: ");
      if (line.find("- op: ") != std::string::npos) {
        o.patches[target].push_back({After(line, "- op: "), "", ""});
      } else if (line.rfind("        path: ", 0) == 0) {
        o.patches[target].back().path = After(line, "path: ");
      } else if (line.rfind("        value: ", 0) == 0) {
        o.patches[target].back().value = After(line, "value: ");
      }
    }
  }
  return o;
}

constexpr char kArgs[] = "/spec/template/spec/containers/0/args/-";
constexpr char kGpuRequest[] =
    "/spec/template/spec/containers/0/resources/requests/nvidia.com~1gpu";
constexpr char kGpuLimit[] = "/spec/template/spec/containers/0/resources/limits/nvidia.com~1gpu";

PlanConfig Planned() {
  PlanConfig c = Disaggregated(23, 2, 2, 8);
  c.max_num_batched_tokens = 8192;
  c.local_prefill_threshold = 512;
  c.policy = PlacementPolicy::kRoundRobin;
  return c;
}

TEST(PlanKustomizeTest, DisaggregatedPlanSetsReplicasRouterFlagsEngineFlagsAndGpus) {
  KustomizeOptions options;
  options.max_num_seqs = 128;
  options.load_poll_ms = 250;
  options.comment = {"planned by a test"};
  const std::string yaml = RenderKustomization(Planned(), options);
  EXPECT_EQ(yaml.rfind("# planned by a test\n", 0), 0u) << yaml;
  const Overlay o = Parse(yaml);
  EXPECT_THAT(o.resources, ElementsAre("../../base"));
  EXPECT_EQ(o.replicas.at("tandem-prefill"), 23);
  EXPECT_EQ(o.replicas.at("tandem-decode"), 2);
  EXPECT_THAT(o.patches.at("tandem-router"),
              ElementsAre(PatchOp{"add", kArgs, "--mode=disaggregated"},
                          PatchOp{"add", kArgs, "--policy=round_robin"},
                          PatchOp{"add", kArgs, "--local-prefill-threshold=512"},
                          PatchOp{"add", kArgs, "--health-interval-ms=250"}));
  auto pool = [](int tp) {
    return std::vector<PatchOp>{{"add", kArgs, "--max-num-batched-tokens=8192"},
                                {"add", kArgs, "--max-num-seqs=128"},
                                {"add", kArgs, "--block-size=16"},
                                {"add", kGpuRequest, absl::StrCat("\"", tp, "\"")},
                                {"add", kGpuLimit, absl::StrCat("\"", tp, "\"")}};
  };
  EXPECT_EQ(o.patches.at("tandem-prefill"), pool(2));
  EXPECT_EQ(o.patches.at("tandem-decode"), pool(8));
}

// A plan placed by the cost policy: the router gets the targets, link rate and hops its model
// predicted with in the simulation (handoff terms only where prompts are handed off).
TEST(PlanKustomizeTest, CostPlansGiveTheRouterWhatItsModelPredictedWith) {
  KustomizeOptions options;
  options.slo_ttft_ms = 250;
  options.slo_tpot_ms = 50;
  options.kv_link_gbps = 400;
  options.disaggregation_hop_us = 100;
  PlanConfig disaggregated = Planned();
  disaggregated.policy = PlacementPolicy::kCost;
  EXPECT_THAT(Parse(RenderKustomization(disaggregated, options)).patches.at("tandem-router"),
              ElementsAre(PatchOp{"add", kArgs, "--mode=disaggregated"},
                          PatchOp{"add", kArgs, "--policy=cost"},
                          PatchOp{"add", kArgs, "--slo-ttft-ms=250"},
                          PatchOp{"add", kArgs, "--slo-tpot-ms=50"},
                          PatchOp{"add", kArgs, "--kv-link-gbps=400"},
                          PatchOp{"add", kArgs, "--disaggregation-hop-us=100"},
                          PatchOp{"add", kArgs, "--local-prefill-threshold=512"},
                          PatchOp{"add", kArgs, "--health-interval-ms=500"}));
  PlanConfig colocated = Colocated(8, 8);
  colocated.policy = PlacementPolicy::kCost;
  const std::vector<PatchOp> router =
      Parse(RenderKustomization(colocated, options)).patches.at("tandem-router");
  ASSERT_EQ(router.size(), 7u);  // after the test and remove of --prefill-dns; the last: the poll
  EXPECT_THAT(
      std::vector<PatchOp>(router.begin() + 2, router.end() - 1),
      ElementsAre(PatchOp{"add", kArgs, "--mode=colocated"}, PatchOp{"add", kArgs, "--policy=cost"},
                  PatchOp{"add", kArgs, "--slo-ttft-ms=250"},
                  PatchOp{"add", kArgs, "--slo-tpot-ms=50"}));
}

TEST(PlanKustomizeTest, ColocatedPlanScalesPrefillToZeroAndDropsTheRoutersPrefillDns) {
  KustomizeOptions options;
  options.prefix_caching = false;
  const Overlay o = Parse(RenderKustomization(Colocated(8, 8), options));
  EXPECT_EQ(o.replicas.at("tandem-prefill"), 0);
  EXPECT_EQ(o.replicas.at("tandem-decode"), 8);
  EXPECT_EQ(o.patches.count("tandem-prefill"), 0u);
  const std::string dns = "/spec/template/spec/containers/0/args/5";
  EXPECT_THAT(o.patches.at("tandem-router"),
              ElementsAre(PatchOp{"test", dns, "--prefill-dns=tandem-prefill:50071"},
                          PatchOp{"remove", dns, ""}, PatchOp{"add", kArgs, "--mode=colocated"},
                          PatchOp{"add", kArgs, "--policy=least_loaded"},
                          PatchOp{"add", kArgs, "--health-interval-ms=500"}));
  const std::vector<PatchOp>& decode = o.patches.at("tandem-decode");
  EXPECT_TRUE(std::find(decode.begin(), decode.end(),
                        PatchOp{"add", kArgs, "--no-prefix-caching"}) != decode.end());
}

// A plan that speculates: the decode pool runs prompt lookup with the planned drafts; the
// prefill pool never decodes and gets neither flag.
TEST(PlanKustomizeTest, SpeculationGoesToTheDecodePoolOnly) {
  PlanConfig planned = Disaggregated(2, 1, 6, 1);
  planned.num_speculative_tokens = 3;
  const Overlay o = Parse(RenderKustomization(planned, KustomizeOptions()));
  const std::vector<PatchOp>& decode = o.patches.at("tandem-decode");
  const std::vector<PatchOp>& prefill = o.patches.at("tandem-prefill");
  for (const PatchOp& op : {PatchOp{"add", kArgs, "--speculative=ngram"},
                            PatchOp{"add", kArgs, "--num-speculative-tokens=3"}}) {
    EXPECT_TRUE(std::find(decode.begin(), decode.end(), op) != decode.end()) << op.value;
    EXPECT_TRUE(std::find(prefill.begin(), prefill.end(), op) == prefill.end()) << op.value;
  }
}

// A plan priced with a draft model: the decode pool loads it (a preset from /models/NAME, a
// directory as it is) instead of looking drafts up in the prompt.
TEST(PlanKustomizeTest, APlannedDraftModelGoesToTheDecodePool) {
  PlanConfig planned = Disaggregated(2, 1, 6, 1);
  planned.num_speculative_tokens = 2;
  for (const auto& [draft, arg] :
       {std::pair<std::string, std::string>{"llama-3.2-1b", "--draft-model=/models/llama-3.2-1b"},
        {"/mnt/draft", "--draft-model=/mnt/draft"}}) {
    KustomizeOptions options;
    options.draft_model = draft;
    const Overlay o = Parse(RenderKustomization(planned, options));
    const std::vector<PatchOp>& decode = o.patches.at("tandem-decode");
    EXPECT_TRUE(std::find(decode.begin(), decode.end(), PatchOp{"add", kArgs, arg}) != decode.end())
        << arg;
    EXPECT_TRUE(std::find(decode.begin(), decode.end(),
                          PatchOp{"add", kArgs, "--speculative=ngram"}) == decode.end());
  }
}

TEST(PlanKustomizeTest, AutoPlanRunsDecodeNodesThatPrefillForEachOther) {
  PlanConfig c = Auto(8, 8);
  c.local_prefill_threshold = 512;
  c.policy = PlacementPolicy::kCost;
  const Overlay o = Parse(RenderKustomization(c, KustomizeOptions()));
  EXPECT_EQ(o.replicas.at("tandem-prefill"), 0);
  EXPECT_EQ(o.replicas.at("tandem-decode"), 8);
  EXPECT_EQ(o.patches.count("tandem-prefill"), 0u);
  const std::string dns = "/spec/template/spec/containers/0/args/5";
  EXPECT_THAT(o.patches.at("tandem-router"),
              ElementsAre(PatchOp{"test", dns, "--prefill-dns=tandem-prefill:50071"},
                          PatchOp{"remove", dns, ""}, PatchOp{"add", kArgs, "--mode=auto"},
                          PatchOp{"add", kArgs, "--policy=cost"},
                          PatchOp{"add", kArgs, "--slo-ttft-ms=2000"},
                          PatchOp{"add", kArgs, "--slo-tpot-ms=100"},
                          PatchOp{"add", kArgs, "--kv-link-gbps=0"},
                          PatchOp{"add", kArgs, "--disaggregation-hop-us=0"},
                          PatchOp{"add", kArgs, "--local-prefill-threshold=512"},
                          PatchOp{"add", kArgs, "--health-interval-ms=500"}));
  const std::vector<PatchOp>& decode = o.patches.at("tandem-decode");
  ASSERT_FALSE(decode.empty());
  EXPECT_EQ(decode.back(), (PatchOp{"add", kArgs, "--serve-prefill"}));
}

TEST(PlanKustomizeTest, FindArgReadsTheArgsListOnly) {
  const std::string manifest = R"(spec:
  containers:
    - name: router
      command: ["tandem-router"]
      args:
        - --model=$(TANDEM_MODEL_DIR)
        # a comment between items
        - --listen=0.0.0.0:50051
        - --prefill-dns=tandem-prefill:50071
        - --decode-dns=tandem-decode:50061
      ports:
        - --prefill-dns=not-an-arg
)";
  const std::optional<ArgItem> arg = FindArg(manifest, "--prefill-dns");
  ASSERT_TRUE(arg.has_value());
  EXPECT_EQ(arg->index, 2);
  EXPECT_EQ(arg->text, "--prefill-dns=tandem-prefill:50071");
  EXPECT_FALSE(FindArg(manifest, "--ports").has_value());
  EXPECT_FALSE(FindArg("spec: {}\n", "--prefill-dns").has_value());
}

std::filesystem::path TempDir(const std::string& name) {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() /
                                    ("tandem_plan_test_" + std::to_string(getpid()) + "_" + name);
  std::filesystem::remove_all(dir);
  return dir;
}

std::string ReadFile(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

const std::string kBase = std::string(TANDEM_SOURCE_DIR) + "/deploy/k8s/base";

TEST(PlanKustomizeTest, WriteKustomizationFindsPrefillDnsInTheRepositoryBase) {
  const std::filesystem::path dir = TempDir("colocated");
  KustomizeOptions options;
  options.base = kBase;  // absolute: dir / base is the base itself
  options.prefill_dns_arg_index = 99;
  ASSERT_TRUE(WriteKustomization(dir.string(), Colocated(4, 8), options).ok());
  const Overlay o = Parse(ReadFile(dir / "kustomization.yaml"));
  EXPECT_THAT(o.resources, ElementsAre(kBase));
  const std::vector<PatchOp>& router = o.patches.at("tandem-router");
  ASSERT_GE(router.size(), 2u);
  EXPECT_EQ(router[0], (PatchOp{"test", "/spec/template/spec/containers/0/args/5",
                                "--prefill-dns=tandem-prefill:50071"}));

  // A base without the arg: nothing to remove.
  const std::filesystem::path bare = TempDir("bare_base");
  std::filesystem::create_directories(bare);
  std::ofstream(bare / "router.yaml") << "spec:\n  args:\n    - --listen=0.0.0.0:50051\n";
  options.base = bare.string();
  ASSERT_TRUE(WriteKustomization(dir.string(), Colocated(4, 8), options).ok());
  EXPECT_EQ(Parse(ReadFile(dir / "kustomization.yaml")).patches.at("tandem-router").front(),
            (PatchOp{"add", kArgs, "--mode=colocated"}));
  std::filesystem::remove_all(dir);
  std::filesystem::remove_all(bare);
}

// `kubectl kustomize` of an overlay of the repository's base; empty when kubectl is missing.
std::string Build(const PlanConfig& config, const std::string& name) {
  if (std::system("kubectl version --client >/dev/null 2>&1") != 0) return "";
  const std::filesystem::path dir = TempDir(name);
  KustomizeOptions options;
  options.base = std::filesystem::relative(kBase, dir.parent_path()).string();
  options.base = "../" + options.base;  // from dir, one level below its parent
  EXPECT_TRUE(WriteKustomization(dir.string(), config, options).ok());
  const std::string out = (dir / "rendered.yaml").string();
  const std::string command = "kubectl kustomize " + dir.string() + " > " + out + " 2>&1";
  EXPECT_EQ(std::system(command.c_str()), 0) << ReadFile(out);
  const std::string rendered = ReadFile(out);
  std::filesystem::remove_all(dir);
  return rendered;
}

// The rendered Deployment `name` (the text from its `kind: Deployment` to the next object).
std::string Deployment(const std::string& rendered, const std::string& name) {
  size_t at = 0;
  while ((at = rendered.find("kind: Deployment", at)) != std::string::npos) {
    const size_t end = rendered.find("\n---", at);
    const std::string object = rendered.substr(at, end == std::string::npos ? end : end - at);
    if (object.find("\n  name: " + name + "\n") != std::string::npos) return object;
    at += 1;
  }
  return "";
}

TEST(PlanKustomizeTest, KubectlBuildsTheOverlayOfTheRepositoryBase) {
  const std::string rendered = Build(Planned(), "kubectl_disaggregated");
  if (rendered.empty()) GTEST_SKIP() << "kubectl not installed";
  const std::string prefill = Deployment(rendered, "tandem-prefill");
  const std::string decode = Deployment(rendered, "tandem-decode");
  const std::string router = Deployment(rendered, "tandem-router");
  ASSERT_FALSE(prefill.empty() || decode.empty() || router.empty()) << rendered;
  EXPECT_NE(prefill.find("replicas: 23"), std::string::npos);
  EXPECT_NE(prefill.find("- --max-num-batched-tokens=8192"), std::string::npos);
  EXPECT_NE(prefill.find("nvidia.com/gpu: \"2\""), std::string::npos);
  EXPECT_NE(decode.find("replicas: 2"), std::string::npos);
  EXPECT_NE(decode.find("nvidia.com/gpu: \"8\""), std::string::npos);
  EXPECT_NE(router.find("- --local-prefill-threshold=512"), std::string::npos);
  EXPECT_NE(router.find("- --prefill-dns=tandem-prefill:50071"), std::string::npos);

  const std::string colocated = Build(Colocated(8, 8), "kubectl_colocated");
  const std::string colocated_router = Deployment(colocated, "tandem-router");
  EXPECT_NE(colocated_router.find("- --mode=colocated"), std::string::npos) << colocated;
  EXPECT_EQ(colocated_router.find("--prefill-dns"), std::string::npos);
  EXPECT_NE(Deployment(colocated, "tandem-prefill").find("replicas: 0"), std::string::npos);
}

}  // namespace
}  // namespace tandem::plan
