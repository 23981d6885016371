// The NCCL loader (nccl_api.h) without a GPU: the search order, TANDEM_NCCL_LIB as the only place
// when set, errors that name every path tried, and, where this machine has libnccl.so.2, that the
// search finds it and reads its version (ncclGetVersion needs no device).
#include "common/transport/cuda/nccl_api.h"

#include <glob.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

namespace tandem {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

bool IsFile(const std::string& path) {
  struct stat st {};
  return stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

// Whether any absolute place of the search (globs expanded) holds a libnccl.so.2.
bool AnyNcclFileOnMachine(const NcclSearchEnv& env) {
  for (const std::string& pattern : NcclSearchPatterns(env)) {
    if (pattern.empty() || pattern[0] != '/') continue;
    glob_t matches{};
    const bool found = glob(pattern.c_str(), 0, nullptr, &matches) == 0 && matches.gl_pathc > 0;
    globfree(&matches);
    if (found) return true;
  }
  return false;
}

TEST(NcclApiTest, SearchOrderWithoutTandemNcclLib) {
  const NcclSearchEnv env{.cuda_home = "/opt/cuda-x/", .virtual_env = "/home/u/venv"};
  EXPECT_THAT(NcclSearchPatterns(env),
              ElementsAre("libnccl.so.2", "/opt/cuda-x/lib64/libnccl.so.2",
                          "/usr/local/cuda/lib64/libnccl.so.2", "/usr/local/cuda/lib/libnccl.so.2",
                          "/home/u/venv/lib/python3*/site-packages/nvidia/nccl/lib/libnccl.so.2",
                          "/opt/*/.venv/lib/python3*/site-packages/nvidia/nccl/lib/libnccl.so.2",
                          "/usr/local/lib/python3*/dist-packages/nvidia/nccl/lib/libnccl.so.2",
                          "/usr/lib/python3/dist-packages/nvidia/nccl/lib/libnccl.so.2"));
}

TEST(NcclApiTest, CudaHomeAtTheDefaultIsNotTriedTwice) {
  const std::vector<std::string> patterns = NcclSearchPatterns({.cuda_home = "/usr/local/cuda"});
  EXPECT_EQ(patterns.size(), 6u);
  EXPECT_EQ(patterns[1], "/usr/local/cuda/lib64/libnccl.so.2");
  EXPECT_EQ(patterns[2], "/usr/local/cuda/lib/libnccl.so.2");
}

TEST(NcclApiTest, TandemNcclLibIsTheOnlyPlace) {
  const NcclSearchEnv env{.tandem_nccl_lib = "/x/libnccl.so.2", .cuda_home = "/usr/local/cuda"};
  EXPECT_THAT(NcclSearchPatterns(env), ElementsAre("/x/libnccl.so.2"));
}

TEST(NcclApiTest, MissingTandemNcclLibIsNamedAndNothingElseIsTried) {
  const std::string missing = "/nonexistent/tandem-test/libnccl.so.2";
  absl::StatusOr<NcclApi> api = SearchNccl({.tandem_nccl_lib = missing});
  ASSERT_FALSE(api.ok());
  EXPECT_EQ(api.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(api.status().message(), HasSubstr("TANDEM_NCCL_LIB=" + missing));
  EXPECT_THAT(api.status().message(), HasSubstr("No such file"));
  EXPECT_THAT(api.status().message(), HasSubstr("only place searched"));
  EXPECT_THAT(api.status().message(), ::testing::Not(HasSubstr("/usr/local/cuda")));
}

TEST(NcclApiTest, AFileThatIsNoLibraryIsNamedWithTheLoadersReason) {
  const std::string path = ::testing::TempDir() + "/nccl_api_test_not_a_library.so.2";
  std::ofstream(path) << "not an ELF file";
  absl::StatusOr<NcclApi> api = SearchNccl({.tandem_nccl_lib = path});
  std::remove(path.c_str());
  ASSERT_FALSE(api.ok());
  EXPECT_EQ(api.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(api.status().message(), HasSubstr(path));
}

TEST(NcclApiTest, ALibraryWithoutNcclNamesTheMissingFunction) {
  absl::StatusOr<NcclApi> api = LoadNcclFrom({"libm.so.6"});
  ASSERT_FALSE(api.ok());
  EXPECT_THAT(api.status().message(), HasSubstr("libm.so.6"));
  EXPECT_THAT(api.status().message(), HasSubstr("has no ncclGetVersion"));
}

TEST(NcclApiTest, TheErrorListsEveryPathTriedAndGlobsWithoutMatches) {
  absl::StatusOr<NcclApi> api =
      LoadNcclFrom({"/nonexistent/a/libnccl.so.2", "/nonexistent/*/b/libnccl.so.2"});
  ASSERT_FALSE(api.ok());
  EXPECT_EQ(api.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(api.status().message(), HasSubstr("/nonexistent/a/libnccl.so.2: cannot open"));
  EXPECT_THAT(api.status().message(), HasSubstr("/nonexistent/*/b/libnccl.so.2: no match"));
}

TEST(NcclApiTest, TheHintSaysToSetTandemNcclLib) {
  const std::string hint = NcclSearchHint({.cuda_home = "/usr/local/cuda"});
  EXPECT_THAT(hint, HasSubstr("set TANDEM_NCCL_LIB to the full path of libnccl.so.2"));
  absl::StatusOr<NcclApi> api = LoadNcclFrom({"/nonexistent/c/libnccl.so.2"}, hint);
  ASSERT_FALSE(api.ok());
  EXPECT_THAT(api.status().message(),
              HasSubstr("/nonexistent/c/libnccl.so.2: cannot open shared object file"));
  EXPECT_THAT(api.status().message(), HasSubstr(". " + hint));
}

TEST(NcclApiTest, FindsThisMachinesNcclAndReadsItsVersion) {
  NcclSearchEnv env = NcclSearchEnvFromProcess();
  env.tandem_nccl_lib.clear();
  absl::StatusOr<NcclApi> api = SearchNccl(env);
  if (!api.ok() && !AnyNcclFileOnMachine(env)) {
    GTEST_SKIP() << "no libnccl.so.2 on this machine (neither by name nor in any place searched): "
                 << api.status();
  }
  ASSERT_TRUE(api.ok()) << api.status();
  EXPECT_TRUE(IsFile(api->path)) << api->path;
  EXPECT_THAT(api->path, HasSubstr("libnccl"));
  EXPECT_GE(api->version, 2000) << NcclVersionString(api->version);  // 2.x in either encoding
  const std::string version = NcclVersionString(api->version);
  EXPECT_GE(std::atoi(version.c_str()), 2) << version;
  EXPECT_NE(api->Send, nullptr);
  EXPECT_NE(api->Recv, nullptr);
  EXPECT_STRNE(api->GetErrorString(ncclSuccess), "");
  // The file the search picked loads again by its full path.
  absl::StatusOr<NcclApi> again = SearchNccl({.tandem_nccl_lib = api->path});
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->version, api->version);
}

TEST(NcclApiTest, VersionStrings) {
  EXPECT_EQ(NcclVersionString(22809), "2.28.9");
  EXPECT_EQ(NcclVersionString(21003), "2.10.3");
  EXPECT_EQ(NcclVersionString(2804), "2.8.4");  // before NCCL 2.9
}

// LoadNccl itself reads TANDEM_NCCL_LIB once per process: run in a fresh process (the threadsafe
// death-test style re-executes this binary for the one test).
TEST(NcclApiDeathTest, LoadNcclNamesAMissingTandemNcclLib) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        setenv("TANDEM_NCCL_LIB", "/nonexistent/from-env/libnccl.so.2", 1);
        absl::StatusOr<const NcclApi*> api = LoadNccl();
        absl::StatusOr<const NcclApi*> again = LoadNccl();  // the cached answer
        std::fprintf(stderr, "%s | %s\n", api.status().ToString().c_str(),
                     again.status().ToString().c_str());
        std::exit(api.ok() || again.ok() ? 0 : 3);
      },
      ::testing::ExitedWithCode(3),
      "UNAVAILABLE: cannot load NCCL; tried /nonexistent/from-env/libnccl.so.2: .*"
      "TANDEM_NCCL_LIB=/nonexistent/from-env/libnccl.so.2 is set.*\\| UNAVAILABLE: cannot load");
}

}  // namespace
}  // namespace tandem
