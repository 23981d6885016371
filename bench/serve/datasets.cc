#include "bench/serve/datasets.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/util/status_macros.h"
#include "nlohmann/json.hpp"

namespace tandem::bench {
namespace {

using json = nlohmann::json;

// vLLM's ShareGPT filter (benchmark_dataset.is_valid_sequence).
constexpr int32_t kShareGptMinLen = 4;
constexpr int32_t kShareGptMaxPrompt = 1024;
constexpr int32_t kShareGptMaxTotal = 2048;

// A 64-bit mixer (splitmix64's finaliser): deterministic, well spread, cheap to evaluate per token.
uint64_t Mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

absl::Status ValidateIds(const TokenIdRange& ids) {
  if (ids.min < 0 || ids.max <= ids.min) {
    return absl::InvalidArgumentError(absl::StrCat("token id range [", ids.min, ", ", ids.max,
                                                   ") must be non-empty with min >= 0"));
  }
  return absl::OkStatus();
}

absl::Status ValidateCount(int n, const char* what, int minimum) {
  if (n < minimum) {
    return absl::InvalidArgumentError(absl::StrCat(what, " must be >= ", minimum, ", got ", n));
  }
  return absl::OkStatus();
}

void AppendRandomIds(std::mt19937_64& rng, const TokenIdRange& ids, int64_t n,
                     std::vector<int32_t>* out) {
  std::uniform_int_distribution<int32_t> id(ids.min, ids.max - 1);
  for (int64_t i = 0; i < n; ++i) out->push_back(id(rng));
}

// Clips a drawn length to [1, dist.max] (no upper clip for max 0, beyond int32's range).
int32_t ClipLength(double x, const LengthDistribution& dist) {
  double hi = dist.max > 0 ? dist.max : static_cast<double>(std::numeric_limits<int32_t>::max());
  return static_cast<int32_t>(std::clamp(x, 1.0, hi));
}

int32_t DrawLength(const LengthDistribution& dist, std::mt19937_64& rng) {
  if (dist.kind == "uniform") {
    // vLLM's --random-range-ratio: integers in [int(mean * (1 - r)), int(mean * (1 + r))].
    auto lo = static_cast<int64_t>(dist.mean * (1 - dist.range_ratio));
    auto hi = static_cast<int64_t>(dist.mean * (1 + dist.range_ratio));
    return ClipLength(static_cast<double>(std::uniform_int_distribution<int64_t>(lo, hi)(rng)),
                      dist);
  }
  if (dist.kind == "lognormal") {
    // E[exp(N(mu, s^2))] = exp(mu + s^2 / 2), so this mu makes the mean `mean`.
    double mu = std::log(dist.mean) - dist.sigma * dist.sigma / 2;
    return ClipLength(std::round(std::lognormal_distribution<double>(mu, dist.sigma)(rng)), dist);
  }
  return ClipLength(std::round(dist.mean), dist);  // fixed
}

// The whole file, or NotFound / InvalidArgument naming it.
absl::StatusOr<std::string> ReadWholeFile(const std::string& path, const char* what) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) {
    return absl::NotFoundError(absl::StrCat(what, " '", path, "' does not exist"));
  }
  if (std::filesystem::is_directory(path, ec)) {
    return absl::InvalidArgumentError(absl::StrCat(what, " '", path, "' is a directory"));
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot open ", what, " '", path, "': ", std::strerror(errno)));
  }
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// An integral JSON number (an integral float too, e.g. 12.0), else nullopt.
std::optional<int64_t> AsInt(const json& v) {
  if (v.is_number_unsigned()) {
    uint64_t u = v.get<uint64_t>();
    if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return std::nullopt;
    return static_cast<int64_t>(u);
  }
  if (v.is_number_integer()) return v.get<int64_t>();
  if (v.is_number_float()) {
    double d = v.get<double>();
    if (std::isfinite(d) && std::floor(d) == d && std::abs(d) < 9e15) {
      return static_cast<int64_t>(d);
    }
  }
  return std::nullopt;
}

// One ShareGPT conversation reduced to what the benchmark uses.
struct Exchange {
  std::string prompt;
  std::string reply;
};

// The first human turn and the turn after it; nullopt when the conversation has none (short or
// empty conversations are common in real ShareGPT dumps and are skipped, not errors).
absl::StatusOr<std::optional<Exchange>> ReadConversation(const json& entry, size_t index,
                                                         const std::string& path) {
  auto error = [&](const std::string& what) {
    return absl::InvalidArgumentError(
        absl::StrCat("ShareGPT file '", path, "': entry ", index, ": ", what));
  };
  if (!entry.is_object()) return error(absl::StrCat("must be an object, got ", entry.type_name()));
  auto conv = entry.find("conversations");
  if (conv == entry.end()) return error("has no 'conversations' field");
  if (!conv->is_array()) {
    return error(absl::StrCat("'conversations' must be an array, got ", conv->type_name()));
  }
  // A string field of turn `t`, or an error naming the entry and the turn.
  auto field = [&](size_t t, const char* name) -> absl::StatusOr<std::string> {
    const json& turn = (*conv)[t];
    if (!turn.is_object()) {
      return error(
          absl::StrCat("conversations[", t, "] must be an object, got ", turn.type_name()));
    }
    auto it = turn.find(name);
    if (it == turn.end() || !it->is_string()) {
      return error(absl::StrCat("conversations[", t, "] needs a string '", name, "' field"));
    }
    return it->get<std::string>();
  };
  for (size_t t = 0; t < conv->size(); ++t) {
    ASSIGN_OR_RETURN(std::string from, field(t, "from"));
    if (from != "human" && from != "user") continue;
    if (t + 1 >= conv->size()) return std::optional<Exchange>();
    ASSIGN_OR_RETURN(std::string prompt, field(t, "value"));
    ASSIGN_OR_RETURN(std::string reply, field(t + 1, "value"));
    return std::optional<Exchange>(Exchange{std::move(prompt), std::move(reply)});
  }
  return std::optional<Exchange>();
}

// Trace line fields; errors name the file, the line and the field.
class TraceLineReader {
 public:
  TraceLineReader(const json& obj, const std::string& path, int line)
      : obj_(obj), path_(path), line_(line) {}

  absl::Status Error(const std::string& what) const {
    return absl::InvalidArgumentError(absl::StrCat(path_, ":", line_, ": ", what));
  }

  absl::StatusOr<int32_t> PositiveInt(const char* field) const {
    auto it = obj_.find(field);
    if (it == obj_.end()) return Error(absl::StrCat("field '", field, "' is missing"));
    std::optional<int64_t> v = AsInt(*it);
    if (!v || *v < 1 || *v > std::numeric_limits<int32_t>::max()) {
      return Error(
          absl::StrCat("field '", field, "' must be a positive integer, got ", it->dump()));
    }
    return static_cast<int32_t>(*v);
  }

  absl::StatusOr<double> TimestampMs() const {
    auto it = obj_.find("timestamp");
    if (it == obj_.end()) return Error("field 'timestamp' is missing");
    if (!it->is_number() || !std::isfinite(it->get<double>()) || it->get<double>() < 0) {
      return Error(absl::StrCat("field 'timestamp' must be a number of milliseconds >= 0, got ",
                                it->dump()));
    }
    return it->get<double>();
  }

  // Absent: no shared blocks.
  absl::StatusOr<std::vector<uint64_t>> HashIds() const {
    std::vector<uint64_t> ids;
    auto it = obj_.find("hash_ids");
    if (it == obj_.end() || it->is_null()) return ids;
    if (!it->is_array()) {
      return Error(absl::StrCat("field 'hash_ids' must be an array, got ", it->dump()));
    }
    for (size_t i = 0; i < it->size(); ++i) {
      const json& h = (*it)[i];
      if (h.is_number_unsigned()) {
        ids.push_back(h.get<uint64_t>());
      } else if (std::optional<int64_t> v = AsInt(h)) {
        ids.push_back(static_cast<uint64_t>(*v));
      } else {
        return Error(absl::StrCat("field 'hash_ids'[", i, "] must be an integer, got ", h.dump()));
      }
    }
    return ids;
  }

 private:
  const json& obj_;
  const std::string& path_;
  const int line_;
};

// The tokens of the block a hash id stands for: the same for every request naming that hash id.
uint64_t BlockKey(uint64_t seed, uint64_t hash_id) {
  return Mix64(seed ^ Mix64(hash_id ^ 0x5bd1e9955bd1e995ULL));
}

// The largest block AppendBlockTokens builds at once (longer ones are built in pieces).
constexpr int64_t kBlockTokensAtOnce = 512;

// Appends tokens [from, from + n) of the block keyed `key`, n <= kBlockTokensAtOnce. Token j is
// murmur3's 32-bit finalizer of (the key's low half + j), xored with the key's high half (two
// keys give different blocks), mapped into the id range by multiply-shift (Lemire's "fast
// range": ids are uniform to within one part in 2^32 / span). 32-bit lanes, so the loop
// vectorizes: tandem-sim builds billions of trace tokens, and this is 5x faster than the 64-bit
// mix and exact remainder it replaced (measured alone, 300 million tokens: 0.62 -> 0.125 s).
void AppendBlockTokens(uint64_t key, int64_t from, int64_t n, const TokenIdRange& ids,
                       std::vector<int32_t>* out) {
  int32_t tokens[kBlockTokensAtOnce];
  const auto low = static_cast<uint32_t>(key);
  const auto high = static_cast<uint32_t>(key >> 32);
  const auto span = static_cast<uint32_t>(ids.max - ids.min);
  for (int64_t j = 0; j < n; ++j) {
    uint32_t x = low + static_cast<uint32_t>(from + j);
    x ^= x >> 16;
    x *= 0x85ebca6bU;
    x ^= x >> 13;
    x *= 0xc2b2ae35U;
    x ^= x >> 16;
    x ^= high;
    tokens[j] = ids.min + static_cast<int32_t>((static_cast<uint64_t>(x) * span) >> 32);
  }
  out->insert(out->end(), tokens, tokens + n);
}

}  // namespace

absl::Status ValidateLengthDistribution(const LengthDistribution& dist, std::string_view name) {
  auto error = [&](const std::string& what) {
    return absl::InvalidArgumentError(absl::StrCat(std::string(name), ": ", what));
  };
  if (dist.kind != "fixed" && dist.kind != "uniform" && dist.kind != "lognormal") {
    return error(
        absl::StrCat("distribution must be fixed, uniform or lognormal, got '", dist.kind, "'"));
  }
  if (!(dist.mean >= 1) || !std::isfinite(dist.mean)) {
    return error(absl::StrCat("mean length must be a finite number >= 1, got ", dist.mean));
  }
  if (dist.mean > std::numeric_limits<int32_t>::max() / 2) {
    return error(absl::StrCat("mean length ", dist.mean, " is too large"));
  }
  if (dist.max < 0) return error(absl::StrCat("max length must be >= 0, got ", dist.max));
  if (dist.max > 0 && dist.mean > dist.max) {
    return error(absl::StrCat("mean length ", dist.mean, " exceeds the max length ", dist.max));
  }
  if (dist.kind == "uniform" && !(dist.range_ratio >= 0 && dist.range_ratio < 1)) {
    return error(absl::StrCat("range ratio must be in [0, 1), got ", dist.range_ratio));
  }
  if (dist.kind == "lognormal" && (!(dist.sigma > 0) || !std::isfinite(dist.sigma))) {
    return error(absl::StrCat("lognormal sigma must be a finite number > 0, got ", dist.sigma));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<BenchRequest>> RandomDataset(const RandomDatasetOptions& options) {
  RETURN_IF_ERROR(ValidateCount(options.num_prompts, "number of prompts", 0));
  RETURN_IF_ERROR(ValidateLengthDistribution(options.input, "random input length"));
  RETURN_IF_ERROR(ValidateLengthDistribution(options.output, "random output length"));
  RETURN_IF_ERROR(ValidateIds(options.ids));
  // Separate streams, so the lengths do not depend on the id range and vice versa.
  std::mt19937_64 lengths(options.seed);
  std::mt19937_64 ids(Mix64(options.seed ^ 0x1d5c0b7a2f3e4d61ULL));
  std::vector<BenchRequest> requests(options.num_prompts);
  for (BenchRequest& r : requests) {
    r.prompt_len = DrawLength(options.input, lengths);
    r.output_len = DrawLength(options.output, lengths);
    r.prompt_ids.reserve(r.prompt_len);
    AppendRandomIds(ids, options.ids, r.prompt_len, &r.prompt_ids);
  }
  return requests;
}

absl::StatusOr<std::vector<BenchRequest>> SharedPrefixDataset(const SharedPrefixOptions& options) {
  RETURN_IF_ERROR(ValidateCount(options.num_prefixes, "number of prefixes", 1));
  RETURN_IF_ERROR(ValidateCount(options.questions_per_prefix, "questions per prefix", 1));
  RETURN_IF_ERROR(ValidateCount(options.prefix_len, "prefix length", 1));
  RETURN_IF_ERROR(ValidateCount(options.question_len, "question length", 1));
  RETURN_IF_ERROR(ValidateCount(options.output_len, "output length", 1));
  RETURN_IF_ERROR(ValidateIds(options.ids));
  if (static_cast<int64_t>(options.num_prefixes) * options.questions_per_prefix > (1 << 24) ||
      static_cast<int64_t>(options.prefix_len) + options.question_len >
          std::numeric_limits<int32_t>::max()) {
    return absl::InvalidArgumentError("shared-prefix dataset is too large");
  }
  std::mt19937_64 rng(options.seed);
  std::vector<BenchRequest> requests;
  requests.reserve(static_cast<size_t>(options.num_prefixes) * options.questions_per_prefix);
  for (int p = 0; p < options.num_prefixes; ++p) {
    std::vector<int32_t> prefix;
    prefix.reserve(options.prefix_len);
    AppendRandomIds(rng, options.ids, options.prefix_len, &prefix);
    for (int q = 0; q < options.questions_per_prefix; ++q) {
      BenchRequest r;
      r.prompt_ids.reserve(static_cast<size_t>(options.prefix_len) + options.question_len);
      r.prompt_ids = prefix;
      AppendRandomIds(rng, options.ids, options.question_len, &r.prompt_ids);
      r.prompt_len = static_cast<int32_t>(r.prompt_ids.size());
      r.output_len = options.output_len;
      requests.push_back(std::move(r));
    }
  }
  if (options.shuffle) std::shuffle(requests.begin(), requests.end(), rng);
  return requests;
}

absl::StatusOr<std::vector<BenchRequest>> LoadShareGpt(const ShareGptOptions& options,
                                                       const TokenCounter& count_tokens) {
  RETURN_IF_ERROR(ValidateCount(options.num_prompts, "number of prompts", 1));
  if (options.fixed_output_len && *options.fixed_output_len < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("fixed output length must be >= 1, got ", *options.fixed_output_len));
  }
  const std::string& path = options.path;
  ASSIGN_OR_RETURN(std::string text, ReadWholeFile(path, "ShareGPT file"));
  json doc;
  try {
    doc = json::parse(text);
  } catch (const json::parse_error& e) {
    return absl::InvalidArgumentError(
        absl::StrCat("ShareGPT file '", path, "' is not valid JSON: ", e.what()));
  }
  if (!doc.is_array()) {
    return absl::InvalidArgumentError(
        absl::StrCat("ShareGPT file '", path, "' must hold a JSON array of conversations, got ",
                     doc.type_name()));
  }
  std::vector<Exchange> exchanges;
  for (size_t i = 0; i < doc.size(); ++i) {
    ASSIGN_OR_RETURN(std::optional<Exchange> e, ReadConversation(doc[i], i, path));
    if (e) exchanges.push_back(std::move(*e));
  }
  doc = json();  // the text of big dumps is copied into `exchanges`; free the tree early

  // Like vLLM: shuffle, then tokenize in that order until enough pass the filter (counting
  // tokens of every conversation of a large dump would take far longer than needed).
  std::mt19937_64 rng(options.seed);
  std::shuffle(exchanges.begin(), exchanges.end(), rng);
  std::vector<BenchRequest> requests;
  for (size_t i = 0;
       i < exchanges.size() && static_cast<int>(requests.size()) < options.num_prompts; ++i) {
    absl::StatusOr<int32_t> prompt_len = count_tokens(exchanges[i].prompt);
    if (!prompt_len.ok()) {
      return absl::Status(prompt_len.status().code(),
                          absl::StrCat("counting the tokens of a ShareGPT prompt from '", path,
                                       "': ", prompt_len.status().message()));
    }
    int32_t output_len;
    if (options.fixed_output_len) {
      output_len = *options.fixed_output_len;
    } else {
      absl::StatusOr<int32_t> reply_len = count_tokens(exchanges[i].reply);
      if (!reply_len.ok()) {
        return absl::Status(reply_len.status().code(),
                            absl::StrCat("counting the tokens of a ShareGPT reply from '", path,
                                         "': ", reply_len.status().message()));
      }
      output_len = *reply_len;
    }
    // A fixed output length skips the minimum-reply check (as in vLLM), not the total check.
    if (*prompt_len < kShareGptMinLen ||
        (!options.fixed_output_len && output_len < kShareGptMinLen) ||
        *prompt_len > kShareGptMaxPrompt ||
        static_cast<int64_t>(*prompt_len) + output_len > kShareGptMaxTotal) {
      continue;
    }
    BenchRequest r;
    r.prompt_text = std::move(exchanges[i].prompt);
    r.prompt_len = *prompt_len;
    r.output_len = output_len;
    requests.push_back(std::move(r));
  }
  if (static_cast<int>(requests.size()) < options.num_prompts) {
    return absl::InvalidArgumentError(absl::StrCat(
        "ShareGPT file '", path, "': only ", requests.size(), " of its ", exchanges.size(),
        " conversations pass the length filter (prompt and reply >= ", kShareGptMinLen,
        " tokens, prompt <= ", kShareGptMaxPrompt, ", prompt + reply <= ", kShareGptMaxTotal,
        "), fewer than the ", options.num_prompts, " prompts asked for"));
  }
  return requests;
}

std::vector<int32_t> TracePromptIds(const BenchRequest& request) {
  if (!request.deferred_prompt.has_value()) return request.prompt_ids;
  std::vector<int32_t> prompt;
  prompt.reserve(request.prompt_len);
  AppendTracePromptIds(request, &prompt);
  return prompt;
}

void AppendTracePromptIds(const BenchRequest& request, std::vector<int32_t>* out) {
  if (!request.deferred_prompt.has_value()) {
    out->insert(out->end(), request.prompt_ids.begin(), request.prompt_ids.end());
    return;
  }
  const DeferredTracePrompt& d = *request.deferred_prompt;
  const TokenIdRange ids{.min = d.token_id_min, .max = d.token_id_max};
  const int64_t input_length = request.prompt_len;
  out->reserve(out->size() + static_cast<size_t>(input_length));
  int64_t filled = 0;
  for (uint64_t h : d.hash_ids) {
    const uint64_t key = BlockKey(d.seed, h);
    const int64_t n = std::min<int64_t>(d.hash_block_tokens, input_length - filled);
    for (int64_t from = 0; from < n; from += kBlockTokensAtOnce) {
      AppendBlockTokens(key, from, std::min(kBlockTokensAtOnce, n - from), ids, out);
    }
    filled += std::max<int64_t>(n, 0);
  }
  // Longer than its blocks: tokens of its own, seeded by the line so runs repeat.
  if (filled < input_length) {
    std::mt19937_64 rng(Mix64(d.seed ^ Mix64(static_cast<uint64_t>(d.line) + 0x7f4a7c15)));
    AppendRandomIds(rng, ids, input_length - filled, out);
  }
}

absl::StatusOr<std::vector<BenchRequest>> LoadTrace(const TraceOptions& options) {
  RETURN_IF_ERROR(ValidateCount(options.num_prompts, "number of prompts", 0));
  RETURN_IF_ERROR(ValidateCount(options.hash_block_tokens, "hash block tokens", 1));
  RETURN_IF_ERROR(ValidateIds(options.ids));
  if (!(options.time_scale > 0) || !std::isfinite(options.time_scale)) {
    return absl::InvalidArgumentError(
        absl::StrCat("trace time scale must be a finite number > 0, got ", options.time_scale));
  }
  const std::string& path = options.path;
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) {
    return absl::NotFoundError(absl::StrCat("trace file '", path, "' does not exist"));
  }
  if (std::filesystem::is_directory(path, ec)) {
    return absl::InvalidArgumentError(absl::StrCat("trace file '", path, "' is a directory"));
  }
  std::ifstream in(path);
  if (!in) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot open trace file '", path, "': ", std::strerror(errno)));
  }

  std::vector<BenchRequest> requests;
  std::string text;
  double last_ms = 0;
  for (int line = 1; std::getline(in, text); ++line) {
    if (options.num_prompts > 0 && static_cast<int>(requests.size()) >= options.num_prompts) break;
    if (text.find_first_not_of(" \t\r") == std::string::npos) continue;  // blank line
    json obj;
    try {
      obj = json::parse(text);
    } catch (const json::parse_error& e) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ":", line, ": not a JSON object: ", e.what()));
    }
    TraceLineReader reader(obj, path, line);
    if (!obj.is_object()) {
      return reader.Error(absl::StrCat("must be a JSON object, got ", obj.type_name()));
    }
    ASSIGN_OR_RETURN(double ms, reader.TimestampMs());
    ASSIGN_OR_RETURN(int32_t input_length, reader.PositiveInt("input_length"));
    ASSIGN_OR_RETURN(int32_t output_length, reader.PositiveInt("output_length"));
    ASSIGN_OR_RETURN(std::vector<uint64_t> hash_ids, reader.HashIds());
    // File order is send order: a trace out of order is more likely a mistake than intended.
    if (!requests.empty() && ms < last_ms) {
      return reader.Error(absl::StrCat("timestamp ", ms, " is earlier than the previous line's ",
                                       last_ms, " (trace lines must be in time order)"));
    }
    last_ms = ms;

    BenchRequest r;
    r.prompt_len = input_length;
    r.output_len = output_length;
    r.timestamp_s = ms / 1000.0 * options.time_scale;
    r.deferred_prompt = DeferredTracePrompt{.hash_ids = std::move(hash_ids),
                                            .line = line,
                                            .seed = options.seed,
                                            .hash_block_tokens = options.hash_block_tokens,
                                            .token_id_min = options.ids.min,
                                            .token_id_max = options.ids.max};
    if (!options.defer_prompt_ids) {
      r.prompt_ids = TracePromptIds(r);
      r.deferred_prompt.reset();
    }
    requests.push_back(std::move(r));
  }
  if (in.bad()) {
    return absl::InvalidArgumentError(
        absl::StrCat("reading trace file '", path, "' failed: ", std::strerror(errno)));
  }
  if (requests.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("trace file '", path, "' has no requests"));
  }
  return requests;
}

}  // namespace tandem::bench
