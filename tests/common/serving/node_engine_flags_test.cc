// The flags every node shares (AddNodeEngineFlags, AddNodeKvTransportFlags): --backend parsed once
// into a BackendKind, each backend's flags filling its own options, and every flag in --help.
#include <string>
#include <vector>

#include "common/backend/backend_kind.h"
#include "common/serving/node_engine.h"
#include "common/serving/node_kv_transport.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tandem {
namespace {

using ::testing::HasSubstr;

TEST(BackendKindTest, ParsesEveryNameItPrints) {
  for (BackendKind kind : {BackendKind::kCpu, BackendKind::kCuda, BackendKind::kSim}) {
    EXPECT_EQ(ParseBackendKind(BackendKindName(kind)), kind) << BackendKindName(kind);
  }
  EXPECT_EQ(BackendKindName(BackendKind::kCpu), "cpu");
  EXPECT_EQ(BackendKindName(BackendKind::kCuda), "cuda");
  EXPECT_EQ(BackendKindName(BackendKind::kSim), "sim");
  for (const char* bad : {"", "CPU", "gpu", "tpu", "cuda ", "simulator"}) {
    EXPECT_EQ(ParseBackendKind(bad), std::nullopt) << bad;
  }
}

std::string ParseNodeFlags(std::vector<const char*> args, NodeEngineOptions* options) {
  args.insert(args.begin(), "tandem-node");
  FlagSet flags;
  AddNodeEngineFlags(flags, options);
  bool help = false;
  return flags.Parse(static_cast<int>(args.size()), args.data(), &help);
}

TEST(NodeEngineFlagsTest, BackendIsCpuByDefaultAndEachBackendsFlagsFillItsOptions) {
  NodeEngineOptions defaults;
  EXPECT_EQ(ParseNodeFlags({}, &defaults), "");
  EXPECT_EQ(defaults.backend, BackendKind::kCpu);

  NodeEngineOptions o;
  EXPECT_EQ(ParseNodeFlags({"--backend",
                            "sim",
                            "--threads",
                            "3",
                            "--cuda-device=1",
                            "--max-model-len",
                            "4096",
                            "--no-cuda-graphs",
                            "--sim-gpu",
                            "h200",
                            "--sim-model",
                            "llama-3.1-8b",
                            "--sim-tp",
                            "2",
                            "--sim-kv-scale",
                            "4",
                            "--sim-memory-utilization",
                            "0.8",
                            "--sim-time-scale",
                            "0.5",
                            "--sim-kv-blocks",
                            "100",
                            "--kv-cache-mb",
                            "64",
                            "--block-size",
                            "32",
                            "--max-num-batched-tokens",
                            "256",
                            "--max-num-seqs",
                            "8",
                            "--no-prefix-caching"},
                           &o),
            "");
  EXPECT_EQ(o.backend, BackendKind::kSim);
  EXPECT_EQ(o.cpu.num_threads, 3);
  EXPECT_EQ(o.cuda.device, 1);
  EXPECT_EQ(o.cuda.max_model_len, 4096);
  EXPECT_FALSE(o.cuda.graphs);
  EXPECT_EQ(o.sim.gpu, "h200");
  EXPECT_EQ(o.sim.model, "llama-3.1-8b");
  EXPECT_EQ(o.sim.tensor_parallel, 2);
  EXPECT_EQ(o.sim.kv_scale, 4);
  EXPECT_DOUBLE_EQ(o.sim.memory_utilization, 0.8);
  EXPECT_DOUBLE_EQ(o.sim.time_scale, 0.5);
  EXPECT_EQ(o.sim.kv_blocks, 100);
  EXPECT_EQ(o.kv_cache_mib, 64);
  EXPECT_EQ(o.block_size, 32);
  EXPECT_EQ(o.max_num_batched_tokens, 256);
  EXPECT_EQ(o.max_num_seqs, 8);
  EXPECT_FALSE(o.enable_prefix_caching);

  NodeEngineOptions cuda;
  EXPECT_EQ(ParseNodeFlags({"--backend=cuda"}, &cuda), "");
  EXPECT_EQ(cuda.backend, BackendKind::kCuda);
}

TEST(NodeEngineFlagsTest, AnUnknownBackendIsAFlagError) {
  NodeEngineOptions o;
  EXPECT_EQ(ParseNodeFlags({"--backend", "tpu"}, &o),
            "--backend expects cpu, cuda or sim, got 'tpu'");
  EXPECT_EQ(o.backend, BackendKind::kCpu);
}

TEST(NodeEngineFlagsTest, HelpListsEveryNodeFlagInItsSection) {
  // (owner, writer): a prefill node, a decode node, a decode node that may prefill for others
  // (tandem-decode: --serve-prefill).
  for (auto [owner, writer] :
       {std::pair(false, false), std::pair(true, false), std::pair(true, true)}) {
    NodeEngineOptions engine;
    NodeKvTransportOptions kv;
    kv.owner = owner;
    kv.writer = writer;
    FlagSet flags;
    AddNodeEngineFlags(flags, &engine);
    AddNodeKvTransportFlags(flags, &kv);
    const std::string help = flags.Help("Usage: tandem-node\n");
    for (const char* section : {"\nNode:\n", "\nBackend:\n", "\nEngine:\n", "\nKV transport:\n",
                                "\nTLS (this node's gRPC server):\n"}) {
      EXPECT_THAT(help, HasSubstr(section));
    }
    for (const char* line : {"  --model DIR ",
                             "  --backend cpu|cuda|sim ",
                             "  --threads N ",
                             "  --cuda-device N ",
                             "  --max-model-len N ",
                             "  --no-cuda-graphs ",
                             "  --sim-gpu NAME ",
                             "  --sim-model NAME ",
                             "  --sim-tp N ",
                             "  --sim-kv-scale N ",
                             "  --sim-memory-utilization F ",
                             "  --sim-kv-blocks N ",
                             "  --sim-time-scale F ",
                             "  --kv-cache-mb N ",
                             "  --block-size N ",
                             "  --max-num-batched-tokens N ",
                             "  --max-num-seqs N ",
                             "  --no-prefix-caching ",
                             "  --served-model-name NAME ",
                             "  --node-id NAME ",
                             "  --kv-transport KIND ",
                             "  --kv-advertise HOST:PORT",
                             "  --kv-interface NAME[,NAME] ",
                             "  --kv-port-range LO-HI ",
                             "  --cluster-secret-file PATH ",
                             "  --insecure-no-handoff-auth ",
                             "  --tls-cert PATH ",
                             "  --tls-key PATH ",
                             "  --tls-client-ca PATH "}) {
      EXPECT_THAT(help, HasSubstr(line));
    }
    // A prefill node also dials decode nodes (ConnectKv), as does a decode node that prefills for
    // others; a decode node that only receives serves only.
    EXPECT_EQ(help.find("--node-tls-ca PATH") != std::string::npos, !owner || writer) << help;
    EXPECT_THAT(help, HasSubstr("(default 0.9)"));
  }
}

TEST(NodeServerFlagsTest, HelpShowsTheBinarysOwnDefaults) {
  NodeServerOptions server = {.listen = "0.0.0.0:50061", .metrics_listen = "0.0.0.0:9401"};
  FlagSet flags;
  AddNodeServerFlags(flags, &server);
  const std::string help = flags.Help("Usage: tandem-node\n");
  EXPECT_THAT(help, HasSubstr("  --listen HOST:PORT "));
  EXPECT_THAT(help, HasSubstr("(default 0.0.0.0:50061; port 0 = any free port)"));
  EXPECT_THAT(help, HasSubstr("(default 0.0.0.0:9401; port 0 = any"));
  EXPECT_THAT(help, HasSubstr("(default 30000)"));
  EXPECT_THAT(help, HasSubstr("  --ready-file PATH "));
  std::vector<const char*> args = {"tandem-node",
                                   "--listen=127.0.0.1:0",
                                   "--metrics-listen=",
                                   "--drain-timeout-ms",
                                   "5",
                                   "--ready-file",
                                   "/tmp/r"};
  bool help_asked = false;
  EXPECT_EQ(flags.Parse(static_cast<int>(args.size()), args.data(), &help_asked), "");
  EXPECT_EQ(server.listen, "127.0.0.1:0");
  EXPECT_EQ(server.metrics_listen, "");
  EXPECT_EQ(server.drain_timeout_ms, 5);
  EXPECT_EQ(server.ready_file, "/tmp/r");
}

}  // namespace
}  // namespace tandem
