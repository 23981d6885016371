// Ready files: parsing, atomic writes, and waiting for one while the writer runs or dies.
#include "tools/cluster/ready_file.h"

#include <filesystem>
#include <fstream>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/integration/process_launcher.h"

namespace tandem {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Pair;

TEST(ParseReadyFileTest, GrpcPidAndExtras) {
  auto info = ParseReadyFile(R"({"grpc": "127.0.0.1:4242", "pid": 77, "http": "127.0.0.1:8000",
                                 "port": 4242})");
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->grpc, "127.0.0.1:4242");
  EXPECT_EQ(info->pid, 77);
  EXPECT_THAT(info->extra, ElementsAre(Pair("http", "127.0.0.1:8000"), Pair("port", "4242")));
}

TEST(ParseReadyFileTest, RejectsIncompleteFiles) {
  EXPECT_THAT(std::string(ParseReadyFile("").status().message()), HasSubstr("not a JSON object"));
  EXPECT_THAT(std::string(ParseReadyFile(R"({"grpc": "127.0.0.1:1")").status().message()),
              HasSubstr("not a JSON object"));
  EXPECT_THAT(std::string(ParseReadyFile(R"({"pid": 1})").status().message()),
              HasSubstr("\"grpc\""));
  EXPECT_THAT(std::string(ParseReadyFile(R"({"grpc": "", "pid": 1})").status().message()),
              HasSubstr("\"grpc\""));
  EXPECT_THAT(std::string(ParseReadyFile(R"({"grpc": "a:1", "pid": "1"})").status().message()),
              HasSubstr("\"pid\""));
}

class ReadyFileWaitTest : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = MakeTestTempDir("ready_file_test_"); }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::unique_ptr<ChildProcess> Shell(const std::string& script) {
    ChildSpec spec;
    spec.binary = "/bin/sh";
    spec.args = {"-c", script, "sh", dir_ + "/ready.json"};
    spec.stdout_path = dir_ + "/log";
    auto child = ChildProcess::Spawn(spec);
    EXPECT_TRUE(child.ok()) << child.status();
    return child.ok() ? *std::move(child) : nullptr;
  }

  std::string dir_;
};

TEST_F(ReadyFileWaitTest, WriteAtomicallyThenRead) {
  std::string path = dir_ + "/ready.json";
  ASSERT_TRUE(WriteFileAtomically(path, R"({"grpc": "127.0.0.1:5", "pid": 5})").ok());
  auto info = ReadReadyFile(path);
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->grpc, "127.0.0.1:5");
  // No temp file left beside it.
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir_), {}), 1);
  EXPECT_EQ(ReadReadyFile(dir_ + "/absent.json").status().code(), absl::StatusCode::kNotFound);
}

TEST_F(ReadyFileWaitTest, ReturnsOnceTheChildWritesIt) {
  auto child = Shell(
      "sleep 0.2; printf '{\"grpc\": \"127.0.0.1:7\", \"pid\": %d}' $$ > \"$1.tmp\"; "
      "mv \"$1.tmp\" \"$1\"; sleep 30");
  ASSERT_NE(child, nullptr);
  auto info = WaitForReadyFile(dir_ + "/ready.json", *child, absl::Seconds(20));
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->grpc, "127.0.0.1:7");
  EXPECT_EQ(info->pid, child->pid());
}

TEST_F(ReadyFileWaitTest, ChildExitingFirstIsFailedPrecondition) {
  auto child = Shell("exit 5");
  ASSERT_NE(child, nullptr);
  auto info = WaitForReadyFile(dir_ + "/ready.json", *child, absl::Seconds(20));
  ASSERT_FALSE(info.ok());
  EXPECT_EQ(info.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(info.status().message()), HasSubstr("exited with status 5"));
}

TEST_F(ReadyFileWaitTest, TimeoutIsDeadlineExceeded) {
  auto child = Shell("sleep 30");
  ASSERT_NE(child, nullptr);
  auto info = WaitForReadyFile(dir_ + "/ready.json", *child, absl::Milliseconds(200));
  ASSERT_FALSE(info.ok());
  EXPECT_EQ(info.status().code(), absl::StatusCode::kDeadlineExceeded);
}

TEST_F(ReadyFileWaitTest, ShouldStopCancels) {
  auto child = Shell("sleep 30");
  ASSERT_NE(child, nullptr);
  auto info =
      WaitForReadyFile(dir_ + "/ready.json", *child, absl::Seconds(20), [] { return true; });
  EXPECT_EQ(info.status().code(), absl::StatusCode::kCancelled);
}

}  // namespace
}  // namespace tandem
