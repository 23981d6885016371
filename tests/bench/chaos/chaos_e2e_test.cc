// The CI version of tandem-chaos (issue 17 item 4): the real binary, a 2 prefill + 2 decode sim
// cluster, 90 s of open-loop load at 4 requests/s and a fault every 10 s. Seed 1 draws every
// kind (kill, stop, term, netcut) and hits every node. Asserted: the goals that hold today — no
// request lost (every one ended within the router's timeout plus a grace), no wrong token in any
// stream, every node's KV blocks all free again after the load — and that the faults were really
// done. Streams that a fault breaks after their first token end with an error today (unless the
// router migrates them): they are reported in the JSON, not asserted away.
// TANDEM_CHAOS_SECONDS changes the load's length.
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/integration/process_launcher.h"
#include "tests/integration/test_dirs.h"
#include "tests/integration/test_model_dir.h"

namespace tandem::testing {
namespace {

using json = nlohmann::json;

double ChaosSeconds() {
  const char* env = std::getenv("TANDEM_CHAOS_SECONDS");
  double seconds = 0;
  if (env != nullptr && absl::SimpleAtod(env, &seconds) && seconds > 0) return seconds;
  return 90;
}

TEST(ChaosTest, TwoMinutesOfFaultsLoseNothingCorruptNothingLeakNothing) {
  ASSERT_EQ(MissingBinaries({"tandem-chaos", "tandem-router", "tandem-prefill", "tandem-decode"}),
            "");
  const std::string out_dir = TestBinaryDir() + "/chaos";
  std::filesystem::create_directories(out_dir);
  const std::string out = out_dir + "/chaos_test.json";
  std::filesystem::remove(out);
  const double seconds = ChaosSeconds();
  CommandResult r = RunCommand(BinaryPath("tandem-chaos"),
                               {"--model",
                                TestModelDir("llama"),
                                "--duration-s",
                                absl::StrCat(seconds),
                                "--rate",
                                "4",
                                "--fault-interval-s",
                                "10",
                                "--seed",
                                "1",
                                "--max-tokens",
                                "32",
                                "--request-timeout-ms",
                                "30000",
                                "--settle-s",
                                "40",
                                "--out",
                                out,
                                "--log-dir",
                                out_dir + "/logs"},
                               {}, absl::Seconds(seconds + 180));
  ASSERT_FALSE(r.timed_out) << r.stdout_text << r.stderr_text;
  ASSERT_TRUE(r.exit_code == 0 || r.exit_code == 1)
      << "tandem-chaos could not run (exit " << r.exit_code << ")\n"
      << r.stderr_text;
  std::ifstream in(out);
  std::stringstream text;
  text << in.rdbuf();
  json report = json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
  ASSERT_TRUE(report.is_object()) << "no JSON report in " << out << "\n" << r.stderr_text;
  const std::string context = absl::StrCat(r.stdout_text, "\n", r.stderr_text);
  const json& requests = report["requests"];

  // The goals.
  EXPECT_EQ(requests["lost"], 0) << context;
  EXPECT_EQ(requests["wrong_tokens"], 0) << context;
  EXPECT_EQ(requests["wrong_token_requests"], 0) << context;
  ASSERT_EQ(report["kv_after_load"].size(), 4u) << context;
  for (const json& node : report["kv_after_load"]) {
    EXPECT_TRUE(node["reachable"].get<bool>()) << node.dump() << context;
    EXPECT_EQ(node["leaked_blocks"], 0) << node.dump() << context;
  }
  EXPECT_EQ(r.exit_code, 0) << context;

  // Every request is accounted for once, and most of them completed.
  const int sent = requests["sent"];
  EXPECT_EQ(sent, static_cast<int>(std::ceil(4 * seconds)));
  EXPECT_EQ(requests["completed"].get<int>() + requests["failed_clear_error"].get<int>() +
                requests["failed_unclear"].get<int>() + requests["lost"].get<int>() +
                requests["wrong_token_requests"].get<int>(),
            sent);
  EXPECT_GT(requests["completed"].get<int>(), sent / 2) << context;
  EXPECT_GT(requests["tokens_checked"].get<int>(), 0);

  // The faults were done: every one to its end, every kind when the network could be cut.
  std::set<std::string> kinds;
  for (const json& fault : report["faults"]) {
    EXPECT_TRUE(fault["ok"].get<bool>()) << fault.dump();
    kinds.insert(fault["kind"].get<std::string>());
  }
  EXPECT_EQ(report["faults"].size(), static_cast<size_t>(std::ceil(seconds / 10) - 1)) << context;
  if (seconds >= 90) {
    EXPECT_TRUE(kinds.count("kill") && kinds.count("stop") && kinds.count("term")) << context;
    if (report["network_cuts"] == "available") {
      EXPECT_TRUE(kinds.count("netcut")) << context;
    }
  }
  EXPECT_TRUE(report["unexpected_exits"].empty()) << report["unexpected_exits"].dump();
  // RSS and threads were sampled for the router and every node.
  EXPECT_EQ(report["processes"].size(), 5u);
}

}  // namespace
}  // namespace tandem::testing
