#include "bench/serve/datasets.h"

#include <stdlib.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace tandem::bench {
namespace {

// A fresh directory, removed with its contents on destruction.
class TempDir {
 public:
  TempDir() {
    std::string tmpl = ::testing::TempDir() + "tandem_bench_datasets_XXXXXX";
    char* p = ::mkdtemp(tmpl.data());
    EXPECT_NE(p, nullptr);
    path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  std::string Write(const std::string& name, const std::string& contents) const {
    std::string file = path_ + "/" + name;
    std::ofstream out(file, std::ios::binary | std::ios::trunc);
    out << contents;
    EXPECT_TRUE(out.good()) << file;
    return file;
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// Whitespace-separated words stand in for the served model's tokenizer.
absl::StatusOr<int32_t> CountWords(std::string_view text) {
  std::istringstream in{std::string(text)};
  int32_t n = 0;
  for (std::string w; in >> w;) ++n;
  return n;
}

std::string Words(int n, const std::string& word = "w") {
  std::string s;
  for (int i = 0; i < n; ++i) {
    if (i > 0) s += ' ';
    s += word + std::to_string(i);
  }
  return s;
}

double MeanPromptLen(const std::vector<BenchRequest>& r) {
  double sum = 0;
  for (const BenchRequest& x : r) sum += x.prompt_len;
  return sum / static_cast<double>(r.size());
}

double MeanOutputLen(const std::vector<BenchRequest>& r) {
  double sum = 0;
  for (const BenchRequest& x : r) sum += x.output_len;
  return sum / static_cast<double>(r.size());
}

void ExpectIdsInRange(const BenchRequest& r, const TokenIdRange& ids) {
  ASSERT_EQ(static_cast<int32_t>(r.prompt_ids.size()), r.prompt_len);
  for (int32_t id : r.prompt_ids) {
    ASSERT_GE(id, ids.min);
    ASSERT_LT(id, ids.max);
  }
}

bool Contains(const absl::Status& s, const std::string& text) {
  return std::string(s.message()).find(text) != std::string::npos;
}

// ---- random ----------------------------------------------------------------------------------

TEST(RandomDatasetTest, FixedLengthsAndIdsInRange) {
  RandomDatasetOptions o;
  o.num_prompts = 20;
  o.input = {"fixed", 50};
  o.output = {"fixed", 7};
  o.ids = {100, 110};
  auto r = RandomDataset(o);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->size(), 20u);
  std::set<int32_t> seen;
  for (const BenchRequest& x : *r) {
    EXPECT_EQ(x.prompt_len, 50);
    EXPECT_EQ(x.output_len, 7);
    EXPECT_TRUE(x.prompt_text.empty());
    EXPECT_FALSE(x.timestamp_s.has_value());
    ExpectIdsInRange(x, o.ids);
    seen.insert(x.prompt_ids.begin(), x.prompt_ids.end());
  }
  EXPECT_EQ(seen.size(), 10u);  // 1000 draws from 10 ids cover them all
}

TEST(RandomDatasetTest, UniformLengthsStayInTheRangeWithTheMean) {
  RandomDatasetOptions o;
  o.num_prompts = 4000;
  o.input = {"uniform", 200, 0.5};
  o.output = {"uniform", 40, 0.25};
  o.seed = 3;
  auto r = RandomDataset(o);
  ASSERT_TRUE(r.ok()) << r.status();
  int32_t in_min = 1 << 30, in_max = 0, out_min = 1 << 30, out_max = 0;
  for (const BenchRequest& x : *r) {
    in_min = std::min(in_min, x.prompt_len);
    in_max = std::max(in_max, x.prompt_len);
    out_min = std::min(out_min, x.output_len);
    out_max = std::max(out_max, x.output_len);
  }
  EXPECT_EQ(in_min, 100);  // both ends reached over 4000 draws of 201 values
  EXPECT_EQ(in_max, 300);
  EXPECT_EQ(out_min, 30);
  EXPECT_EQ(out_max, 50);
  EXPECT_NEAR(MeanPromptLen(*r), 200, 4);
  EXPECT_NEAR(MeanOutputLen(*r), 40, 0.5);
  ExpectIdsInRange((*r)[0], o.ids);
}

TEST(RandomDatasetTest, LognormalHasTheMeanAndALongTail) {
  RandomDatasetOptions o;
  o.num_prompts = 20000;
  o.input = {"lognormal", 100, 0, 0.8};
  o.output = {"lognormal", 30, 0, 0.5, 60};  // clipped at 60
  o.ids = {5, 6};                            // one id: keeps 2M prompt tokens cheap to check
  auto r = RandomDataset(o);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_NEAR(MeanPromptLen(*r), 100, 3);
  std::vector<int32_t> lens;
  int32_t out_max = 0;
  for (const BenchRequest& x : *r) {
    lens.push_back(x.prompt_len);
    out_max = std::max(out_max, x.output_len);
    ASSERT_GE(x.prompt_len, 1);
    ASSERT_GE(x.output_len, 1);
  }
  EXPECT_EQ(out_max, 60);
  std::sort(lens.begin(), lens.end());
  // The median of a lognormal is exp(mu) = mean * exp(-sigma^2 / 2) = 72.6, below the mean.
  EXPECT_NEAR(lens[lens.size() / 2], 100 * std::exp(-0.32), 3);
  EXPECT_GT(lens.back(), 500);
}

TEST(RandomDatasetTest, SeededAndReproducible) {
  RandomDatasetOptions o;
  o.num_prompts = 5;
  o.input = {"uniform", 30, 0.5};
  auto a = RandomDataset(o), b = RandomDataset(o);
  ASSERT_TRUE(a.ok() && b.ok());
  for (size_t i = 0; i < a->size(); ++i) {
    EXPECT_EQ((*a)[i].prompt_ids, (*b)[i].prompt_ids);
    EXPECT_EQ((*a)[i].output_len, (*b)[i].output_len);
  }
  o.seed = 1;
  auto c = RandomDataset(o);
  ASSERT_TRUE(c.ok());
  EXPECT_NE((*a)[0].prompt_ids, (*c)[0].prompt_ids);
}

TEST(RandomDatasetTest, RejectsBadOptions) {
  RandomDatasetOptions o;
  o.ids = {10, 10};
  EXPECT_EQ(RandomDataset(o).status().code(), absl::StatusCode::kInvalidArgument);
  o = {};
  o.num_prompts = -1;
  EXPECT_EQ(RandomDataset(o).status().code(), absl::StatusCode::kInvalidArgument);
  o = {};
  o.input.kind = "zipf";
  auto r = RandomDataset(o);
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(Contains(r.status(), "input")) << r.status();
  EXPECT_TRUE(Contains(r.status(), "zipf")) << r.status();
}

TEST(ValidateLengthDistributionTest, NamesTheFlagAndTheProblem) {
  EXPECT_TRUE(ValidateLengthDistribution({"fixed", 1}, "--x").ok());
  EXPECT_TRUE(ValidateLengthDistribution({"uniform", 10, 0.9}, "--x").ok());
  EXPECT_TRUE(ValidateLengthDistribution({"lognormal", 10, 0, 1.2, 100}, "--x").ok());
  auto expect_error = [](const LengthDistribution& dist, const std::string& problem) {
    absl::Status s = ValidateLengthDistribution(dist, "--random-input-len");
    ASSERT_FALSE(s.ok()) << problem;
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_TRUE(Contains(s, "--random-input-len")) << s;
    EXPECT_TRUE(Contains(s, problem)) << s;
  };
  expect_error({"gaussian", 10}, "gaussian");
  expect_error({"fixed", 0.5}, "mean");
  expect_error({"fixed", std::nan("")}, "mean");
  expect_error({"uniform", 10, 1.0}, "range ratio");
  expect_error({"uniform", 10, -0.1}, "range ratio");
  expect_error({"lognormal", 10, 0, 0}, "sigma");
  expect_error({"fixed", 10, 0, 0.8, -1}, "max");
  expect_error({"fixed", 10, 0, 0.8, 5}, "exceeds");
}

// ---- shared prefix ---------------------------------------------------------------------------

TEST(SharedPrefixDatasetTest, GroupsShareTheirPrefixAndDifferAcrossGroups) {
  SharedPrefixOptions o;
  o.num_prefixes = 3;
  o.questions_per_prefix = 4;
  o.prefix_len = 32;
  o.question_len = 8;
  o.output_len = 5;
  o.shuffle = false;
  auto r = SharedPrefixDataset(o);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->size(), 12u);
  std::set<std::vector<int32_t>> prefixes, prompts;
  for (int p = 0; p < 3; ++p) {
    const BenchRequest& first = (*r)[p * 4];
    std::vector<int32_t> prefix(first.prompt_ids.begin(), first.prompt_ids.begin() + 32);
    prefixes.insert(prefix);
    for (int q = 0; q < 4; ++q) {
      const BenchRequest& x = (*r)[p * 4 + q];
      EXPECT_EQ(x.prompt_len, 40);
      EXPECT_EQ(x.output_len, 5);
      ExpectIdsInRange(x, o.ids);
      EXPECT_TRUE(std::equal(prefix.begin(), prefix.end(), x.prompt_ids.begin()))
          << "group " << p << " question " << q;
      prompts.insert(x.prompt_ids);
    }
  }
  EXPECT_EQ(prefixes.size(), 3u);  // distinct system prompts
  EXPECT_EQ(prompts.size(), 12u);  // distinct questions
}

TEST(SharedPrefixDatasetTest, ShuffleMixesGroupsButKeepsTheRequests) {
  SharedPrefixOptions o;
  o.num_prefixes = 4;
  o.questions_per_prefix = 6;
  o.prefix_len = 16;
  o.question_len = 4;
  auto ordered_opts = o;
  ordered_opts.shuffle = false;
  auto shuffled = SharedPrefixDataset(o);
  auto ordered = SharedPrefixDataset(ordered_opts);
  ASSERT_TRUE(shuffled.ok() && ordered.ok());
  std::multiset<std::vector<int32_t>> a, b;
  std::vector<std::vector<int32_t>> order_a, order_b;
  for (const auto& x : *shuffled) {
    a.insert(x.prompt_ids);
    order_a.push_back(x.prompt_ids);
  }
  for (const auto& x : *ordered) {
    b.insert(x.prompt_ids);
    order_b.push_back(x.prompt_ids);
  }
  EXPECT_EQ(a, b);
  EXPECT_NE(order_a, order_b);
  auto again = SharedPrefixDataset(o);
  ASSERT_TRUE(again.ok());
  for (size_t i = 0; i < again->size(); ++i) EXPECT_EQ((*again)[i].prompt_ids, order_a[i]);
}

TEST(SharedPrefixDatasetTest, RejectsBadOptions) {
  SharedPrefixOptions o;
  o.num_prefixes = 0;
  auto r = SharedPrefixDataset(o);
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(Contains(r.status(), "prefixes")) << r.status();
  o = {};
  o.question_len = 0;
  EXPECT_EQ(SharedPrefixDataset(o).status().code(), absl::StatusCode::kInvalidArgument);
  o = {};
  o.ids = {5, 2};
  EXPECT_EQ(SharedPrefixDataset(o).status().code(), absl::StatusCode::kInvalidArgument);
}

// ---- ShareGPT --------------------------------------------------------------------------------

std::string Conversation(const std::string& human, const std::string& gpt) {
  return R"({"id": "x", "conversations": [{"from": "human", "value": ")" + human +
         R"("}, {"from": "gpt", "value": ")" + gpt + R"("}]})";
}

TEST(ShareGptTest, ParsesAndAppliesVllmsFilter) {
  TempDir dir;
  std::vector<std::string> entries = {
      Conversation(Words(5), Words(6)),                                 // kept: 5 + 6
      Conversation(Words(3), Words(10)),                                // prompt < 4
      Conversation(Words(10), Words(3)),                                // reply < 4
      Conversation(Words(1025), Words(10)),                             // prompt > 1024
      Conversation(Words(1000), Words(1049)),                           // total 2049 > 2048
      Conversation(Words(1000), Words(1048)),                           // kept: total 2048
      R"({"conversations": []})",                                       // no turns: skipped
      R"({"conversations": [{"from": "human", "value": "a b c d"}]})",  // no reply: skipped
      // A system turn first: the first human turn and the turn after it are used.
      R"({"conversations": [{"from": "system", "value": "s"}, {"from": "human", "value": ")" +
          Words(4) + R"("}, {"from": "gpt", "value": ")" + Words(9) + R"("}]})",
  };
  std::string text = "[";
  for (size_t i = 0; i < entries.size(); ++i) {
    if (i > 0) text += ",\n";
    text += entries[i];
  }
  text += "]";
  ShareGptOptions o;
  o.path = dir.Write("sharegpt.json", text);
  o.num_prompts = 3;
  auto r = LoadShareGpt(o, CountWords);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->size(), 3u);
  std::multiset<std::pair<int32_t, int32_t>> lens;
  for (const BenchRequest& x : *r) {
    EXPECT_TRUE(x.prompt_ids.empty());
    EXPECT_EQ(CountWords(x.prompt_text).value(), x.prompt_len);
    lens.insert({x.prompt_len, x.output_len});
  }
  EXPECT_EQ(lens, (std::multiset<std::pair<int32_t, int32_t>>{{5, 6}, {1000, 1048}, {4, 9}}));

  // More than pass the filter: a clear error, not a silent shortfall.
  o.num_prompts = 4;
  auto too_many = LoadShareGpt(o, CountWords);
  ASSERT_FALSE(too_many.ok());
  EXPECT_TRUE(Contains(too_many.status(), "only 3")) << too_many.status();
  EXPECT_TRUE(Contains(too_many.status(), o.path)) << too_many.status();
}

TEST(ShareGptTest, FixedOutputLengthAndSeededSampling) {
  TempDir dir;
  std::string text = "[";
  for (int i = 0; i < 30; ++i) {
    if (i > 0) text += ",";
    text += Conversation(Words(4 + i), Words(2));  // replies of 2 words
  }
  text += "]";
  ShareGptOptions o;
  o.path = dir.Write("sharegpt.json", text);
  o.num_prompts = 5;
  o.fixed_output_len = 64;  // skips the reply's minimum length, as vLLM does
  o.seed = 11;
  auto a = LoadShareGpt(o, CountWords);
  auto b = LoadShareGpt(o, CountWords);
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_TRUE(b.ok());
  ASSERT_EQ(a->size(), 5u);
  std::vector<int32_t> la, lb;
  for (const auto& x : *a) {
    EXPECT_EQ(x.output_len, 64);
    la.push_back(x.prompt_len);
  }
  for (const auto& x : *b) lb.push_back(x.prompt_len);
  EXPECT_EQ(la, lb);
  o.seed = 12;
  auto c = LoadShareGpt(o, CountWords);
  ASSERT_TRUE(c.ok());
  std::vector<int32_t> lc;
  for (const auto& x : *c) lc.push_back(x.prompt_len);
  EXPECT_NE(la, lc);
  // Without the fixed length every reply (2 words) fails the filter.
  o.fixed_output_len.reset();
  EXPECT_FALSE(LoadShareGpt(o, CountWords).ok());
}

TEST(ShareGptTest, ClearErrors) {
  TempDir dir;
  ShareGptOptions o;
  o.num_prompts = 1;
  o.path = dir.path() + "/missing.json";
  auto r = LoadShareGpt(o, CountWords);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(Contains(r.status(), "missing.json")) << r.status();

  struct Case {
    std::string contents;
    std::string problem;
  };
  const Case cases[] = {
      {"[{\"conversations\": ", "not valid JSON"},
      {R"({"conversations": []})", "JSON array"},
      {"[" + Conversation(Words(5), Words(5)) + R"(, {"id": 3}])",
       "entry 1: has no 'conversations'"},
      {R"([{"conversations": "hi"}])", "entry 0: 'conversations' must be an array"},
      {R"([7])", "entry 0: must be an object"},
      {R"([{"conversations": [{"from": "human", "value": 5}, {"from": "gpt", "value": "x"}]}])",
       "conversations[0] needs a string 'value'"},
      {R"([{"conversations": [{"value": "x"}]}])", "conversations[0] needs a string 'from'"},
  };
  for (const Case& c : cases) {
    o.path = dir.Write("bad.json", c.contents);
    r = LoadShareGpt(o, CountWords);
    ASSERT_FALSE(r.ok()) << c.contents;
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << r.status();
    EXPECT_TRUE(Contains(r.status(), c.problem)) << r.status();
    EXPECT_TRUE(Contains(r.status(), "bad.json")) << r.status();
  }

  // The tokenizer's error comes through with context.
  o.path = dir.Write("ok.json", "[" + Conversation(Words(5), Words(5)) + "]");
  r = LoadShareGpt(o, [](std::string_view) -> absl::StatusOr<int32_t> {
    return absl::InternalError("tokenizer broke");
  });
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInternal);
  EXPECT_TRUE(Contains(r.status(), "tokenizer broke")) << r.status();

  o.num_prompts = 0;
  EXPECT_EQ(LoadShareGpt(o, CountWords).status().code(), absl::StatusCode::kInvalidArgument);
}

// ---- Mooncake trace --------------------------------------------------------------------------

TEST(TraceTest, SharedHashIdsShareTokensAndTimestampsAreScaled) {
  TempDir dir;
  TraceOptions o;
  o.path = dir.Write(
      "trace.jsonl",
      R"({"timestamp": 0, "input_length": 10, "output_length": 3, "hash_ids": [7, 8, 9]})"
      "\n"
      R"({"timestamp": 1500, "input_length": 9, "output_length": 4, "hash_ids": [7, 8, 5]})"
      "\n\n"  // blank lines are skipped
      R"({"timestamp": 1500, "input_length": 14, "output_length": 1, "hash_ids": [7]})"
      "\n"
      R"({"timestamp": 4000, "input_length": 6, "output_length": 2, "hash_ids": [1, 2]})"
      "\n");
  o.hash_block_tokens = 4;
  o.time_scale = 0.5;
  o.ids = {100, 50000};
  auto r = LoadTrace(o);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->size(), 4u);
  const auto& a = (*r)[0].prompt_ids;
  const auto& b = (*r)[1].prompt_ids;
  const auto& c = (*r)[2].prompt_ids;
  const auto& d = (*r)[3].prompt_ids;
  for (const BenchRequest& x : *r) ExpectIdsInRange(x, o.ids);
  EXPECT_EQ((*r)[0].prompt_len, 10);
  EXPECT_EQ((*r)[1].output_len, 4);
  // Blocks 7 and 8 (8 tokens) agree; block 9 vs 5 differ.
  EXPECT_TRUE(std::equal(a.begin(), a.begin() + 8, b.begin()));
  EXPECT_NE(a[8], b[8]);
  // Request 2 holds block 7 and then 10 tokens of its own, not block 8.
  EXPECT_TRUE(std::equal(a.begin(), a.begin() + 4, c.begin()));
  EXPECT_NE(std::vector<int32_t>(c.begin() + 4, c.begin() + 8),
            std::vector<int32_t>(a.begin() + 4, a.begin() + 8));
  EXPECT_NE(d[0], a[0]);
  ASSERT_TRUE((*r)[1].timestamp_s.has_value());
  EXPECT_DOUBLE_EQ(*(*r)[0].timestamp_s, 0.0);
  EXPECT_DOUBLE_EQ(*(*r)[1].timestamp_s, 0.75);  // 1500 ms at half time
  EXPECT_DOUBLE_EQ(*(*r)[3].timestamp_s, 2.0);

  // Same seed, same tokens; another seed, other tokens. num_prompts takes the first lines.
  o.num_prompts = 2;
  auto again = LoadTrace(o);
  ASSERT_TRUE(again.ok());
  ASSERT_EQ(again->size(), 2u);
  EXPECT_EQ((*again)[1].prompt_ids, b);
  o.seed = 99;
  auto other = LoadTrace(o);
  ASSERT_TRUE(other.ok());
  EXPECT_NE((*other)[0].prompt_ids, a);
}

TEST(TraceTest, DeferredPromptsBuildTheSameIdsWhenAsked) {
  TempDir dir;
  TraceOptions o;
  o.path =
      dir.Write("trace.jsonl",
                R"({"timestamp": 0, "input_length": 10, "output_length": 3, "hash_ids": [7, 8, 9]})"
                "\n"
                R"({"timestamp": 10, "input_length": 14, "output_length": 1, "hash_ids": [7]})"
                "\n"
                R"({"timestamp": 20, "input_length": 5, "output_length": 1})"
                "\n");
  o.hash_block_tokens = 4;
  o.seed = 3;
  auto built = LoadTrace(o);
  o.defer_prompt_ids = true;
  auto deferred = LoadTrace(o);
  ASSERT_TRUE(built.ok() && deferred.ok());
  ASSERT_EQ(deferred->size(), 3u);
  for (size_t i = 0; i < deferred->size(); ++i) {
    const BenchRequest& d = (*deferred)[i];
    EXPECT_TRUE(d.prompt_ids.empty());
    ASSERT_TRUE(d.deferred_prompt.has_value());
    EXPECT_EQ(d.prompt_len, (*built)[i].prompt_len);
    EXPECT_EQ(TracePromptIds(d), (*built)[i].prompt_ids) << "line " << i + 1;
    EXPECT_EQ(TracePromptIds((*built)[i]), (*built)[i].prompt_ids);
  }
}

TEST(TraceTest, ErrorsNameTheLineAndTheField) {
  TempDir dir;
  TraceOptions o;
  o.path = dir.path() + "/none.jsonl";
  EXPECT_EQ(LoadTrace(o).status().code(), absl::StatusCode::kNotFound);

  const std::string good =
      R"({"timestamp": 5, "input_length": 4, "output_length": 2, "hash_ids": [1]})";
  struct Case {
    std::string second_line;
    std::string problem;
  };
  const Case cases[] = {
      {"{not json", ":2: not a JSON object"},
      {"[1, 2]", ":2: must be a JSON object"},
      {R"({"input_length": 4, "output_length": 2})", ":2: field 'timestamp' is missing"},
      {R"({"timestamp": -1, "input_length": 4, "output_length": 2})", ":2: field 'timestamp'"},
      {R"({"timestamp": 9, "output_length": 2})", ":2: field 'input_length' is missing"},
      {R"({"timestamp": 9, "input_length": 0, "output_length": 2})",
       ":2: field 'input_length' must be a positive integer"},
      {R"({"timestamp": 9, "input_length": 4, "output_length": 2.5})",
       ":2: field 'output_length' must be a positive integer"},
      {R"({"timestamp": 9, "input_length": 4, "output_length": 2, "hash_ids": 3})",
       ":2: field 'hash_ids' must be an array"},
      {R"({"timestamp": 9, "input_length": 4, "output_length": 2, "hash_ids": [1, "a"]})",
       ":2: field 'hash_ids'[1] must be an integer"},
      {R"({"timestamp": 4, "input_length": 4, "output_length": 2})", ":2: timestamp 4 is earlier"},
  };
  for (const Case& c : cases) {
    o.path = dir.Write("bad.jsonl", good + "\n" + c.second_line + "\n");
    auto r = LoadTrace(o);
    ASSERT_FALSE(r.ok()) << c.second_line;
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_TRUE(Contains(r.status(), "bad.jsonl" + c.problem)) << r.status();
  }
  o.path = dir.Write("empty.jsonl", "\n\n");
  auto r = LoadTrace(o);
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(Contains(r.status(), "no requests")) << r.status();

  o.path = dir.Write("ok.jsonl", good + "\n");
  o.time_scale = 0;
  EXPECT_EQ(LoadTrace(o).status().code(), absl::StatusCode::kInvalidArgument);
  o.time_scale = 1;
  o.hash_block_tokens = 0;
  EXPECT_EQ(LoadTrace(o).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace tandem::bench
