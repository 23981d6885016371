#include "common/model/safetensors.h"

#include <cstring>
#include <filesystem>
#include <span>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/model/safetensors_writer.h"
#include "common/util/half.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/common/model/test_model_dir.h"

namespace tandem {
namespace {

using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testing::ScopedTempDir;
using testing::WriteFile;
using testing::WriteRawSafetensors;

std::vector<float> ToF32(const TensorView& t) {
  std::vector<float> out(static_cast<size_t>(t.numel()));
  ConvertToF32(t, out.data());
  return out;
}

const std::vector<float> kValues = {0.0f, 1.0f, -2.5f, 3.14159f, 1e-3f, -65504.0f, 0.1f, 7.0f};

class RoundTripTest : public ::testing::TestWithParam<DType> {};

TEST_P(RoundTripTest, WriteThenRead) {
  const DType dtype = GetParam();
  ScopedTempDir dir;
  std::vector<uint8_t> a = EncodeF32(dtype, kValues);
  std::vector<float> scalar = {42.0f};
  std::vector<uint8_t> b = EncodeF32(DType::kF32, scalar);
  std::vector<TensorToWrite> tensors = {{"a.weight", dtype, {2, 4}, a}, {"b", DType::kF32, {}, b}};
  ASSERT_TRUE(WriteSafetensors(dir.file("model.safetensors"), tensors, {{"format", "pt"}}).ok());
  EXPECT_FALSE(std::filesystem::exists(dir.file("model.safetensors.tmp")));

  auto store = SafetensorsStore::OpenDir(dir.path());
  ASSERT_TRUE(store.ok()) << store.status();
  EXPECT_THAT((*store)->TensorNames(), ElementsAre("a.weight", "b"));
  EXPECT_EQ((*store)->FileOf("a.weight"), dir.file("model.safetensors"));
  absl::StatusOr<TensorView> t = (*store)->Get("a.weight");
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->dtype, dtype);
  EXPECT_THAT(t->shape, ElementsAre(2, 4));
  EXPECT_EQ(t->nbytes, 8 * DTypeSize(dtype));
  std::vector<float> back = ToF32(*t);
  for (size_t i = 0; i < kValues.size(); ++i) {
    float expected = dtype == DType::kF32    ? kValues[i]
                     : dtype == DType::kBF16 ? Bf16ToF32(F32ToBf16(kValues[i]))
                                             : F16ToF32(F32ToF16(kValues[i]));
    EXPECT_EQ(back[i], expected) << i;
  }
  EXPECT_EQ(ToF32(*(*store)->Get("b")), std::vector<float>{42.0f});
  // Widest dtype first and a padded header: every tensor is aligned for its element type.
  EXPECT_EQ(reinterpret_cast<uintptr_t>((*store)->Get("b")->data) % 4, 0u);
}

INSTANTIATE_TEST_SUITE_P(AllDTypes, RoundTripTest,
                         ::testing::Values(DType::kF32, DType::kBF16, DType::kF16));

TEST(SafetensorsTest, HeaderIsWhatOtherReadersExpect) {
  ScopedTempDir dir;
  std::vector<float> v = {1, 2, 3};
  std::vector<uint8_t> bytes = EncodeF32(DType::kF32, v);
  std::vector<TensorToWrite> tensors = {{"x", DType::kF32, {3}, bytes}};
  ASSERT_TRUE(WriteSafetensors(dir.file("m.safetensors"), tensors).ok());
  absl::StatusOr<std::string> file = ReadFileToString(dir.file("m.safetensors"));
  ASSERT_TRUE(file.ok());
  uint64_t n = 0;
  std::memcpy(&n, file->data(), 8);
  EXPECT_EQ(n % 8, 0u);
  nlohmann::json header = nlohmann::json::parse(file->substr(8, n));
  EXPECT_EQ(header["x"]["dtype"], "F32");
  EXPECT_EQ(header["x"]["data_offsets"], nlohmann::json({0, 12}));
  EXPECT_EQ(file->size(), 8 + n + 12);
}

TEST(SafetensorsTest, WriterRejectsBadInput) {
  ScopedTempDir dir;
  std::vector<uint8_t> bytes(12);
  std::vector<TensorToWrite> wrong_size = {{"x", DType::kF32, {4}, bytes}};
  EXPECT_THAT(WriteSafetensors(dir.file("m.safetensors"), wrong_size).message(),
              AllOf(HasSubstr("'x'"), HasSubstr("12 bytes")));
  std::vector<TensorToWrite> twice = {{"x", DType::kF32, {3}, bytes},
                                      {"x", DType::kF32, {3}, bytes}};
  EXPECT_THAT(WriteSafetensors(dir.file("m.safetensors"), twice).message(), HasSubstr("twice"));
  EXPECT_FALSE(std::filesystem::exists(dir.file("m.safetensors")));
}

// Writes 5 tensors of 10, 20, 30, 40 and 50 floats.
std::vector<std::vector<uint8_t>> FiveTensors(std::vector<TensorToWrite>* tensors) {
  std::vector<std::vector<uint8_t>> storage;
  storage.reserve(5);
  for (int i = 0; i < 5; ++i) {
    std::vector<float> v(10 * (i + 1), static_cast<float>(i));
    storage.push_back(EncodeF32(DType::kF32, v));
    tensors->push_back({absl::StrCat("t", i), DType::kF32, {10 * (i + 1)}, storage.back()});
  }
  return storage;
}

TEST(SafetensorsTest, ShardedRoundTrip) {
  ScopedTempDir dir;
  std::vector<TensorToWrite> tensors;
  auto storage = FiveTensors(&tensors);
  auto shards = ShardIntoCount(tensors, 3);
  ASSERT_TRUE(shards.ok());
  ASSERT_EQ(shards->size(), 3u);
  for (const auto& s : *shards) EXPECT_FALSE(s.empty());
  ASSERT_TRUE(WriteSafetensorsShards(dir.path(), *shards).ok());
  for (int i = 0; i < 3; ++i) {
    EXPECT_TRUE(std::filesystem::exists(dir.file(ShardFileName(i, 3))));
  }
  EXPECT_EQ(ShardFileName(0, 3), "model-00001-of-00003.safetensors");
  auto index = nlohmann::json::parse(*ReadFileToString(dir.file("model.safetensors.index.json")));
  EXPECT_EQ(index["metadata"]["total_size"], 4 * 150);
  EXPECT_EQ(index["weight_map"].size(), 5u);

  auto store = SafetensorsStore::OpenDir(dir.path());
  ASSERT_TRUE(store.ok()) << store.status();
  EXPECT_EQ((*store)->Files().size(), 3u);
  EXPECT_THAT((*store)->description(), HasSubstr("model.safetensors.index.json"));
  for (int i = 0; i < 5; ++i) {
    absl::StatusOr<TensorView> t = (*store)->Get(absl::StrCat("t", i));
    ASSERT_TRUE(t.ok());
    EXPECT_EQ(ToF32(*t), std::vector<float>(10 * (i + 1), static_cast<float>(i)));
    EXPECT_EQ((*store)->FileOf(t->name), dir.file(index["weight_map"][t->name].get<std::string>()));
  }
}

TEST(SafetensorsTest, ShardBySizeAndCount) {
  std::vector<TensorToWrite> tensors;
  auto storage = FiveTensors(&tensors);  // 40, 80, 120, 160, 200 bytes
  auto by_size = ShardBySize(tensors, 150);
  ASSERT_EQ(by_size.size(), 4u);  // [40, 80] [120] [160] [200]
  EXPECT_EQ(by_size[0].size(), 2u);
  EXPECT_EQ(ShardBySize(tensors, 1 << 20).size(), 1u);
  auto five = ShardIntoCount(tensors, 5);
  ASSERT_TRUE(five.ok());
  for (const auto& s : *five) EXPECT_EQ(s.size(), 1u);
  EXPECT_FALSE(ShardIntoCount(tensors, 6).ok());
  EXPECT_FALSE(ShardIntoCount(tensors, 0).ok());
}

TEST(SafetensorsTest, MissingTensorNamesTensorAndFilesSearched) {
  ScopedTempDir dir;
  std::vector<TensorToWrite> tensors;
  auto storage = FiveTensors(&tensors);
  ASSERT_TRUE(WriteSafetensorsShards(dir.path(), *ShardIntoCount(tensors, 2)).ok());
  auto store = SafetensorsStore::OpenDir(dir.path());
  ASSERT_TRUE(store.ok());
  absl::StatusOr<TensorView> t = (*store)->Get("nope.weight");
  EXPECT_EQ(t.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(t.status().message(),
              AllOf(HasSubstr("'nope.weight'"), HasSubstr("model-00001-of-00002.safetensors"),
                    HasSubstr("model-00002-of-00002.safetensors")));
}

TEST(SafetensorsTest, NoWeightsInDirectory) {
  ScopedTempDir dir;
  auto store = SafetensorsStore::OpenDir(dir.path());
  EXPECT_EQ(store.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(store.status().message(),
              AllOf(HasSubstr(dir.path()), HasSubstr("model.safetensors")));
}

// Each malformed file must fail to open with a message naming the file and what is wrong.
struct BadFile {
  const char* label;
  std::string header;
  std::string data;
  std::vector<std::string> expect;  // substrings of the message, besides the path
};

class BadFileTest : public ::testing::TestWithParam<BadFile> {};

TEST_P(BadFileTest, FailsNamingFileAndProblem) {
  const BadFile& bad = GetParam();
  ScopedTempDir dir;
  const std::string path = dir.file("model.safetensors");
  WriteRawSafetensors(path, bad.header, bad.data);
  auto store = SafetensorsStore::OpenFile(path);
  ASSERT_FALSE(store.ok()) << bad.label;
  EXPECT_THAT(store.status().message(), HasSubstr(path)) << bad.label;
  for (const std::string& s : bad.expect) {
    EXPECT_THAT(store.status().message(), HasSubstr(s)) << bad.label;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Malformed, BadFileTest,
    ::testing::Values(BadFile{"i32",
                              R"({"w":{"dtype":"I32","shape":[2],"data_offsets":[0,8]}})",
                              std::string(8, '\0'),
                              {"'w'", "unsupported dtype I32"}},
                      BadFile{"f64",
                              R"({"w":{"dtype":"F64","shape":[1],"data_offsets":[0,8]}})",
                              std::string(8, '\0'),
                              {"'w'", "unsupported dtype F64"}},
                      BadFile{"shape vs span",
                              R"({"w":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})",
                              std::string(8, '\0'),
                              {"'w'", "[3]", "12 bytes", "span 8 bytes"}},
                      BadFile{"past end",
                              R"({"w":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})",
                              std::string(8, '\0'),
                              {"'w'", "truncated"}},
                      BadFile{"overlap",
                              R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                              R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
                              std::string(12, '\0'),
                              {"'a'", "'b'", "overlap"}},
                      BadFile{"not json", R"({"w":{"dtype":"F32",)", "", {"corrupt header"}},
                      BadFile{"no offsets",
                              R"({"w":{"dtype":"F32","shape":[1]}})",
                              std::string(4, '\0'),
                              {"'w'", "data_offsets"}},
                      BadFile{"begin after end",
                              R"({"w":{"dtype":"F32","shape":[0],"data_offsets":[4,0]}})",
                              std::string(4, '\0'),
                              {"'w'", "begin > end"}},
                      BadFile{"negative dim",
                              R"({"w":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}})",
                              std::string(4, '\0'),
                              {"'w'", "shape"}}),
    [](const ::testing::TestParamInfo<BadFile>& info) {
      std::string name = info.param.label;
      for (char& c : name) {
        if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
      }
      return name;
    });

// ParseSafetensors runs the same checks on bytes in memory (tests/fuzz/model_files_fuzzer.cc).
TEST(SafetensorsTest, ParsesBytesInMemory) {
  const std::string header =
      R"({"__metadata__":{"format":"pt"},"b":{"dtype":"BF16","shape":[2],"data_offsets":[8,12]},)"
      R"("a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
  std::string file(8, '\0');
  for (int i = 0; i < 8; ++i) file[i] = static_cast<char>(uint64_t{header.size()} >> (8 * i));
  file += header + std::string(12, '\x01');
  const std::span<const uint8_t> bytes(reinterpret_cast<const uint8_t*>(file.data()), file.size());
  absl::StatusOr<std::vector<TensorView>> tensors = ParseSafetensors(bytes, "mem.safetensors");
  ASSERT_TRUE(tensors.ok()) << tensors.status();
  ASSERT_EQ(tensors->size(), 2u);
  const TensorView& a = (*tensors)[0].name == "a" ? (*tensors)[0] : (*tensors)[1];
  EXPECT_EQ(a.dtype, DType::kF32);
  EXPECT_THAT(a.shape, ElementsAre(2));
  EXPECT_EQ(a.data, bytes.data() + 8 + header.size());
  EXPECT_EQ(a.nbytes, 8u);

  const absl::StatusOr<std::vector<TensorView>> cut =
      ParseSafetensors(bytes.first(bytes.size() - 1), "mem.safetensors");
  EXPECT_EQ(cut.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(cut.status().message(), AllOf(HasSubstr("mem.safetensors"), HasSubstr("truncated")));
}

TEST(SafetensorsTest, TruncatedFileNamesFile) {
  ScopedTempDir dir;
  std::vector<float> v(64, 1.0f);
  std::vector<uint8_t> bytes = EncodeF32(DType::kF32, v);
  std::vector<TensorToWrite> tensors = {{"w", DType::kF32, {64}, bytes}};
  const std::string path = dir.file("model.safetensors");
  ASSERT_TRUE(WriteSafetensors(path, tensors).ok());
  std::filesystem::resize_file(path, std::filesystem::file_size(path) - 10);
  auto store = SafetensorsStore::OpenDir(dir.path());
  EXPECT_EQ(store.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(store.status().message(),
              AllOf(HasSubstr(path), HasSubstr("truncated"), HasSubstr("'w'")));
  // Cut inside the header, and below the 8-byte length.
  std::filesystem::resize_file(path, 20);
  EXPECT_THAT(SafetensorsStore::OpenFile(path).status().message(),
              AllOf(HasSubstr(path), HasSubstr("truncated")));
  std::filesystem::resize_file(path, 3);
  EXPECT_THAT(SafetensorsStore::OpenFile(path).status().message(),
              AllOf(HasSubstr(path), HasSubstr("truncated")));
}

TEST(SafetensorsTest, IndexErrors) {
  ScopedTempDir dir;
  std::vector<TensorToWrite> tensors;
  auto storage = FiveTensors(&tensors);
  ASSERT_TRUE(WriteSafetensorsShards(dir.path(), *ShardIntoCount(tensors, 2)).ok());
  const std::string index_path = dir.file("model.safetensors.index.json");
  auto index = nlohmann::json::parse(*ReadFileToString(index_path));

  // A shard the index lists is missing.
  auto missing = index;
  missing["weight_map"]["t0"] = "model-00009-of-00009.safetensors";
  WriteFile(index_path, missing.dump());
  auto store = SafetensorsStore::OpenDir(dir.path());
  EXPECT_EQ(store.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(store.status().message(),
              AllOf(HasSubstr(dir.file("model-00009-of-00009.safetensors")), HasSubstr(index_path),
                    HasSubstr("'t0'")));

  // The index maps a tensor to a shard that does not hold it.
  auto wrong = index;
  wrong["weight_map"]["t0"] = "model-00002-of-00002.safetensors";
  WriteFile(index_path, wrong.dump());
  EXPECT_THAT(SafetensorsStore::OpenDir(dir.path()).status().message(),
              AllOf(HasSubstr(index_path), HasSubstr("'t0'"),
                    HasSubstr("model-00002-of-00002.safetensors")));

  // A tensor in the index that no shard holds.
  auto ghost = index;
  ghost["weight_map"]["ghost"] = "model-00001-of-00002.safetensors";
  WriteFile(index_path, ghost.dump());
  EXPECT_THAT(SafetensorsStore::OpenDir(dir.path()).status().message(),
              AllOf(HasSubstr(index_path), HasSubstr("'ghost'"), HasSubstr("does not contain")));

  // Paths outside the model directory are refused.
  auto escape = index;
  escape["weight_map"]["t0"] = "../elsewhere.safetensors";
  WriteFile(index_path, escape.dump());
  EXPECT_THAT(SafetensorsStore::OpenDir(dir.path()).status().message(),
              AllOf(HasSubstr(index_path), HasSubstr("not a file name")));

  WriteFile(index_path, "{\"weight_map\": ");
  EXPECT_THAT(SafetensorsStore::OpenDir(dir.path()).status().message(),
              AllOf(HasSubstr(index_path), HasSubstr("JSON")));
  WriteFile(index_path, "{}");
  EXPECT_THAT(SafetensorsStore::OpenDir(dir.path()).status().message(),
              AllOf(HasSubstr(index_path), HasSubstr("weight_map")));
}

TEST(SafetensorsTest, SingleFileWinsOverIndex) {
  ScopedTempDir dir;
  std::vector<TensorToWrite> tensors;
  auto storage = FiveTensors(&tensors);
  ASSERT_TRUE(WriteSafetensorsShards(dir.path(), *ShardIntoCount(tensors, 2)).ok());
  std::vector<TensorToWrite> one(tensors.begin(), tensors.begin() + 1);
  ASSERT_TRUE(WriteSafetensors(dir.file("model.safetensors"), one).ok());
  auto store = SafetensorsStore::OpenDir(dir.path());
  ASSERT_TRUE(store.ok());
  EXPECT_THAT((*store)->TensorNames(), ElementsAre("t0"));
}

}  // namespace
}  // namespace tandem
