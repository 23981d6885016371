#include "common/tokenizer/pre_tokenizer.h"

#include <algorithm>

#include "common/tokenizer/byte_level.h"
#include "common/tokenizer/json_util.h"
#include "common/tokenizer/unicode/unicode_util.h"
#include "common/util/status_macros.h"

namespace tandem {
namespace {

// GPT-2's pattern, used by the ByteLevel pre-tokenizer when use_regex is true.
constexpr std::string_view kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

struct Span {
  size_t begin, end;
  bool is_match;
};

// Covers the whole text with match and gap spans (the shape of HF's find_matches).
std::vector<Span> ToSpans(const std::vector<std::pair<size_t, size_t>>& matches, size_t size,
                          bool invert) {
  std::vector<Span> spans;
  size_t prev = 0;
  for (auto [b, e] : matches) {
    if (prev < b) spans.push_back({prev, b, invert});
    spans.push_back({b, e, !invert});
    prev = e;
  }
  if (prev < size) spans.push_back({prev, size, invert});
  return spans;
}

// Per-character matches of a predicate.
template <typename Pred>
std::vector<std::pair<size_t, size_t>> CharMatches(std::u32string_view text, Pred pred) {
  std::vector<std::pair<size_t, size_t>> out;
  for (size_t i = 0; i < text.size(); ++i) {
    if (pred(text[i])) out.emplace_back(i, i + 1);
  }
  return out;
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

namespace {

void EmitSpans(const PreToken& piece, std::u32string_view text, const std::vector<Span>& in,
               SplitBehavior behavior, std::vector<PreToken>* out) {
  std::vector<std::pair<size_t, size_t>> parts;
  bool previous_match = false;
  switch (behavior) {
    case SplitBehavior::kRemoved:
      for (const Span& s : in) {
        if (!s.is_match) parts.emplace_back(s.begin, s.end);
      }
      break;
    case SplitBehavior::kIsolated:
      for (const Span& s : in) parts.emplace_back(s.begin, s.end);
      break;
    case SplitBehavior::kMergedWithPrevious:
      for (const Span& s : in) {
        if (s.is_match && !previous_match && !parts.empty()) {
          parts.back().second = s.end;
        } else {
          parts.emplace_back(s.begin, s.end);
        }
        previous_match = s.is_match;
      }
      break;
    case SplitBehavior::kMergedWithNext:
      for (auto it = in.rbegin(); it != in.rend(); ++it) {
        if (it->is_match && !previous_match && !parts.empty()) {
          parts.back().first = it->begin;
        } else {
          parts.emplace_back(it->begin, it->end);
        }
        previous_match = it->is_match;
      }
      std::reverse(parts.begin(), parts.end());
      break;
    case SplitBehavior::kContiguous:
      for (const Span& s : in) {
        if (s.is_match == previous_match && !parts.empty()) {
          parts.back().second = s.end;
        } else {
          parts.emplace_back(s.begin, s.end);
        }
        previous_match = s.is_match;
      }
      break;
  }
  for (auto [b, e] : parts) {
    if (b == e) continue;
    out->push_back({unicode::CodePointsToUtf8(text.substr(b, e - b)), piece.at_origin && b == 0});
  }
}

}  // namespace

void PreTokenizer::ApplyStep(const Step& step, PreToken piece, std::vector<PreToken>* out) {
  using K = Step::Kind;
  switch (step.kind) {
    case K::kSplit:
    case K::kWhitespace: {
      const std::u32string text = unicode::Utf8ToCodePoints(piece.text);
      const bool invert = step.kind == K::kWhitespace ? true : step.invert;
      const SplitBehavior behavior =
          step.kind == K::kWhitespace ? SplitBehavior::kRemoved : step.behavior;
      EmitSpans(piece, text, ToSpans(step.pattern[0].FindAll(text), text.size(), invert), behavior,
                out);
      return;
    }
    case K::kDigits:
    case K::kWhitespaceSplit: {
      const std::u32string text = unicode::Utf8ToCodePoints(piece.text);
      if (step.kind == K::kDigits) {
        EmitSpans(piece, text, ToSpans(CharMatches(text, unicode::IsNumber), text.size(), false),
                  step.individual_digits ? SplitBehavior::kIsolated : SplitBehavior::kContiguous,
                  out);
      } else {
        EmitSpans(piece, text,
                  ToSpans(CharMatches(text, unicode::IsWhitespace), text.size(), false),
                  SplitBehavior::kRemoved, out);
      }
      return;
    }
    case K::kByteLevel: {
      if (step.add_prefix_space && (piece.text.empty() || piece.text[0] != ' ')) {
        piece.text.insert(piece.text.begin(), ' ');
      }
      std::vector<PreToken> words;
      if (!step.pattern.empty()) {
        const std::u32string text = unicode::Utf8ToCodePoints(piece.text);
        EmitSpans(piece, text, ToSpans(step.pattern[0].FindAll(text), text.size(), false),
                  SplitBehavior::kIsolated, &words);
      } else {
        words.push_back(std::move(piece));
      }
      for (PreToken& w : words) {
        w.text = byte_level::Encode(w.text);
        out->push_back(std::move(w));
      }
      return;
    }
    case K::kMetaspace: {
      std::string text = TextPattern::Literal(U" ").ReplaceAll(piece.text, step.replacement);
      const bool starts = text.compare(0, step.replacement.size(), step.replacement) == 0;
      if (!starts && (step.prepend == Step::Prepend::kAlways ||
                      (step.prepend == Step::Prepend::kFirst && piece.at_origin))) {
        text = step.replacement + text;
      }
      if (!step.split) {
        out->push_back({std::move(text), piece.at_origin});
        return;
      }
      const std::u32string cps = unicode::Utf8ToCodePoints(text);
      const char32_t rep = unicode::Utf8ToCodePoints(step.replacement)[0];
      PreToken whole{std::string(), piece.at_origin};
      EmitSpans(
          whole, cps,
          ToSpans(CharMatches(cps, [rep](char32_t c) { return c == rep; }), cps.size(), false),
          SplitBehavior::kMergedWithNext, out);
      return;
    }
  }
}

std::vector<PreToken> PreTokenizer::Apply(std::string_view text, bool at_origin) const {
  std::vector<PreToken> pieces;
  pieces.push_back({std::string(text), at_origin});
  for (const Step& step : steps_) {
    std::vector<PreToken> next;
    next.reserve(pieces.size());
    for (PreToken& p : pieces) ApplyStep(step, std::move(p), &next);
    pieces = std::move(next);
  }
  return pieces;
}

}  // namespace tandem
