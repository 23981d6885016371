#include "common/tokenizer/pre_tokenizer.h"

#include <utility>

#include "common/tokenizer/byte_level.h"
#include "common/tokenizer/json_util.h"
#include "common/tokenizer/unicode/unicode_util.h"
#include "common/util/status_macros.h"

namespace tandem {
namespace {

// GPT-2's pattern, used by the ByteLevel pre-tokenizer when use_regex is true.
constexpr std::string_view kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

// Turns the spans of a split (matches and the gaps between them, in order, covering the text)
// into words according to a SplitBehavior, as they arrive: Hugging Face's split() with one span
// of look-ahead instead of a list.
class SpanEmitter {
 public:
  SpanEmitter(std::string_view text, bool at_origin, SplitBehavior behavior,
              PreTokenizer::WordSink sink)
      : text_(text), at_origin_(at_origin), behavior_(behavior), sink_(sink) {}

  // The next span [begin, end). Returns false once the sink has stopped the split.
  bool Add(size_t begin, size_t end, bool is_match) {
    bool ok = true;
    switch (behavior_) {
      case SplitBehavior::kRemoved:
        if (!is_match) ok = Emit(begin, end);
        break;
      case SplitBehavior::kIsolated:
        ok = Emit(begin, end);
        break;
      case SplitBehavior::kMergedWithPrevious:
        // A match joins the word before it, unless that word ends in a match.
        if (is_match && !previous_match_ && pending_) {
          pending_end_ = end;
        } else {
          ok = Flush();
          Hold(begin, end);
        }
        break;
      case SplitBehavior::kMergedWithNext:
        // A match joins the word after it, if that word is not a match.
        if (is_match) {
          ok = Flush();
          Hold(begin, end);
        } else if (pending_ && previous_match_) {
          pending_end_ = end;
          ok = Flush();
        } else {
          ok = Flush() && Emit(begin, end);
        }
        break;
      case SplitBehavior::kContiguous:
        if (is_match == previous_match_ && pending_) {
          pending_end_ = end;
        } else {
          ok = Flush();
          Hold(begin, end);
        }
        break;
    }
    previous_match_ = is_match;
    return ok;
  }

  // Spans from `matches` (ascending, non-overlapping) and the gaps around them up to `size`;
  // `invert` swaps which of the two count as matches.
  bool AddMatch(size_t begin, size_t end, bool invert) {
    if (covered_ < begin && !Add(covered_, begin, invert)) return false;
    covered_ = end;
    return Add(begin, end, !invert);
  }
  bool Finish(bool invert) {
    if (covered_ < text_.size() && !Add(covered_, text_.size(), invert)) return false;
    return Flush();
  }

 private:
  void Hold(size_t begin, size_t end) {
    pending_ = true;
    pending_begin_ = begin;
    pending_end_ = end;
  }
  bool Flush() {
    if (!pending_) return true;
    pending_ = false;
    return Emit(pending_begin_, pending_end_);
  }
  bool Emit(size_t begin, size_t end) {
    if (begin == end) return true;
    return sink_(text_.substr(begin, end - begin), at_origin_ && begin == 0);
  }

  std::string_view text_;
  bool at_origin_;
  SplitBehavior behavior_;
  PreTokenizer::WordSink sink_;
  size_t covered_ = 0;  // AddMatch: end of the spans added so far
  bool previous_match_ = false;
  bool pending_ = false;
  size_t pending_begin_ = 0, pending_end_ = 0;
};

// Splits on the single characters for which pred(c) holds.
template <typename Pred>
bool SplitOnChars(std::string_view text, bool at_origin, SplitBehavior behavior, Pred pred,
                  PreTokenizer::WordSink sink) {
  SpanEmitter emitter(text, at_origin, behavior, sink);
  size_t i = 0;
  while (i < text.size()) {
    const size_t start = i;
    if (pred(unicode::DecodeUtf8(text, &i)) && !emitter.AddMatch(start, i, false)) return false;
  }
  return emitter.Finish(false);
}

// Splits on the matches of `pattern`.
bool SplitOnPattern(std::string_view text, bool at_origin, const TextPattern& pattern,
                    SplitBehavior behavior, bool invert, PreTokenizer::WordSink sink) {
  SpanEmitter emitter(text, at_origin, behavior, sink);
  bool stopped = false;
  pattern.ForEachMatch(text, [&](size_t b, size_t e) {
    stopped = !emitter.AddMatch(b, e, invert);
    return !stopped;
  });
  return !stopped && emitter.Finish(invert);
}

}  // namespace

absl::StatusOr<PreTokenizer> PreTokenizer::FromJson(const nlohmann::json& config,
                                                    std::string_view where) {
  PreTokenizer p;
  if (!config.is_null()) RETURN_IF_ERROR(Parse(config, where, &p.steps_));
  for (const Step& s : p.steps_) p.byte_level_ |= s.kind == Step::Kind::kByteLevel;
  return p;
}

absl::Status PreTokenizer::Parse(const nlohmann::json& config, std::string_view where,
                                 std::vector<Step>* steps) {
  ASSIGN_OR_RETURN(const std::string type, json_util::GetType(config, where));
  using K = Step::Kind;
  if (type == "Sequence") {
    auto it = config.find("pretokenizers");
    if (it == config.end() || !it->is_array()) {
      return json_util::FieldError(json_util::Field(where, "pretokenizers"), "expected an array");
    }
    for (size_t i = 0; i < it->size(); ++i) {
      RETURN_IF_ERROR(Parse((*it)[i], Cat(where, ".pretokenizers[", i, "]"), steps));
    }
    return absl::OkStatus();
  }
  Step step;
  if (type == "Split") {
    step.kind = K::kSplit;
    auto it = config.find("pattern");
    if (it == config.end()) return json_util::FieldError(where, "missing 'pattern'");
    ASSIGN_OR_RETURN(auto pattern, TextPattern::FromJson(*it, json_util::Field(where, "pattern")));
    step.pattern.push_back(std::move(pattern));
    ASSIGN_OR_RETURN(const std::string behavior,
                     json_util::GetString(config, "behavior", "Isolated", where));
    if (behavior == "Removed") {
      step.behavior = SplitBehavior::kRemoved;
    } else if (behavior == "Isolated") {
      step.behavior = SplitBehavior::kIsolated;
    } else if (behavior == "MergedWithPrevious") {
      step.behavior = SplitBehavior::kMergedWithPrevious;
    } else if (behavior == "MergedWithNext") {
      step.behavior = SplitBehavior::kMergedWithNext;
    } else if (behavior == "Contiguous") {
      step.behavior = SplitBehavior::kContiguous;
    } else {
      return json_util::FieldError(json_util::Field(where, "behavior"),
                                   Cat("unknown split behavior '", behavior, "'"));
    }
    ASSIGN_OR_RETURN(step.invert, json_util::GetBool(config, "invert", false, where));
  } else if (type == "ByteLevel") {
    step.kind = K::kByteLevel;
    ASSIGN_OR_RETURN(step.add_prefix_space,
                     json_util::GetBool(config, "add_prefix_space", true, where));
    ASSIGN_OR_RETURN(const bool use_regex, json_util::GetBool(config, "use_regex", true, where));
    if (use_regex) {
      ASSIGN_OR_RETURN(auto p,
                       TextPattern::FromJson({{"Regex", std::string(kGpt2Pattern)}}, where));
      step.pattern.push_back(std::move(p));
    }
  } else if (type == "Metaspace") {
    step.kind = K::kMetaspace;
    ASSIGN_OR_RETURN(step.replacement,
                     json_util::GetString(config, "replacement", "\u2581", where));
    if (unicode::Utf8ToCodePoints(step.replacement).size() != 1) {
      return json_util::FieldError(json_util::Field(where, "replacement"),
                                   "expected a single character");
    }
    ASSIGN_OR_RETURN(const bool add_prefix_space,
                     json_util::GetBool(config, "add_prefix_space", true, where));
    ASSIGN_OR_RETURN(const std::string scheme,
                     json_util::GetString(config, "prepend_scheme",
                                          add_prefix_space ? "always" : "never", where));
    if (scheme == "always") {
      step.prepend = Step::Prepend::kAlways;
    } else if (scheme == "first") {
      step.prepend = Step::Prepend::kFirst;
    } else if (scheme == "never") {
      step.prepend = Step::Prepend::kNever;
    } else {
      return json_util::FieldError(json_util::Field(where, "prepend_scheme"),
                                   Cat("unknown prepend scheme '", scheme, "'"));
    }
    ASSIGN_OR_RETURN(step.split, json_util::GetBool(config, "split", true, where));
  } else if (type == "Digits") {
    step.kind = K::kDigits;
    ASSIGN_OR_RETURN(step.individual_digits,
                     json_util::GetBool(config, "individual_digits", false, where));
  } else if (type == "Whitespace") {
    step.kind = K::kWhitespace;
    ASSIGN_OR_RETURN(auto p, TextPattern::FromJson({{"Regex", R"(\w+|[^\w\s]+)"}}, where));
    step.pattern.push_back(std::move(p));
  } else if (type == "WhitespaceSplit") {
    step.kind = K::kWhitespaceSplit;
  } else {
    return json_util::FieldError(json_util::Field(where, "type"),
                                 Cat("pre-tokenizer type '", type, "' is not supported"));
  }
  steps->push_back(std::move(step));
  return absl::OkStatus();
}

bool PreTokenizer::ApplyStep(const Step& step, std::string_view text, bool at_origin,
                             WordSink sink) {
  using K = Step::Kind;
  switch (step.kind) {
    case K::kSplit:
      return SplitOnPattern(text, at_origin, step.pattern[0], step.behavior, step.invert, sink);
    case K::kWhitespace:
      return SplitOnPattern(text, at_origin, step.pattern[0], SplitBehavior::kRemoved,
                            /*invert=*/true, sink);
    case K::kDigits:
      return SplitOnChars(
          text, at_origin,
          step.individual_digits ? SplitBehavior::kIsolated : SplitBehavior::kContiguous,
          unicode::IsNumber, sink);
    case K::kWhitespaceSplit:
      return SplitOnChars(text, at_origin, SplitBehavior::kRemoved, unicode::IsWhitespace, sink);
    case K::kByteLevel: {
      std::string with_space;
      if (step.add_prefix_space && (text.empty() || text[0] != ' ')) {
        with_space = Cat(" ", text);
        text = with_space;
      }
      auto encode = [sink](std::string_view word, bool origin) {
        return sink(byte_level::Encode(word), origin);
      };
      if (step.pattern.empty()) return encode(text, at_origin);
      return SplitOnPattern(text, at_origin, step.pattern[0], SplitBehavior::kIsolated,
                            /*invert=*/false, encode);
    }
    case K::kMetaspace: {
      std::string replaced = TextPattern::Literal(" ").ReplaceAll(text, step.replacement);
      const bool starts = replaced.compare(0, step.replacement.size(), step.replacement) == 0;
      if (!starts && (step.prepend == Step::Prepend::kAlways ||
                      (step.prepend == Step::Prepend::kFirst && at_origin))) {
        replaced = step.replacement + replaced;
      }
      if (!step.split) return sink(replaced, at_origin);
      const char32_t rep = unicode::Utf8ToCodePoints(step.replacement)[0];
      return SplitOnChars(
          replaced, at_origin, SplitBehavior::kMergedWithNext,
          [rep](char32_t c) { return c == rep; }, sink);
    }
  }
  return true;
}

bool PreTokenizer::ApplyFrom(size_t step, std::string_view text, bool at_origin,
                             WordSink sink) const {
  if (step == steps_.size()) return sink(text, at_origin);
  return ApplyStep(steps_[step], text, at_origin,
                   [this, step, sink](std::string_view word, bool origin) {
                     return ApplyFrom(step + 1, word, origin, sink);
                   });
}

bool PreTokenizer::ForEachWord(std::string_view text, bool at_origin, WordSink sink) const {
  return ApplyFrom(0, text, at_origin, sink);
}

std::vector<PreToken> PreTokenizer::Apply(std::string_view text, bool at_origin) const {
  std::vector<PreToken> words;
  ForEachWord(text, at_origin, [&words](std::string_view word, bool origin) {
    words.push_back({std::string(word), origin});
    return true;
  });
  return words;
}

}  // namespace tandem
