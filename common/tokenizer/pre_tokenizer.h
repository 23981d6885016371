// The tokenizer.json "pre_tokenizer": splits normalized text into words before BPE.
// Supported: Split (regex or string; Isolated/Removed/MergedWithPrevious/MergedWithNext/
// Contiguous; invert), ByteLevel (GPT-2 regex optional, bytes mapped to characters), Metaspace
// (prepend_scheme always/first/never, split), Digits, Whitespace, WhitespaceSplit, Sequence.
//
// Words are produced one at a time, depth first through the steps (the order Hugging Face's
// step-by-step splitting yields), so a caller can stop after the first N words without the
// rest of the text being split: ForEachWord. Work is linear in the text up to where it stops.
#ifndef TANDEM_COMMON_TOKENIZER_PRE_TOKENIZER_H_
#define TANDEM_COMMON_TOKENIZER_PRE_TOKENIZER_H_

#include <string>
#include <string_view>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "common/tokenizer/pattern.h"
#include "nlohmann/json.hpp"

namespace tandem {

// One word produced by pre-tokenization.
struct PreToken {
  std::string text;
  // True when the word starts at offset 0 of the original input (Metaspace "first").
  bool at_origin = false;
};

// How a Split step turns matches into words (HF's SplitDelimiterBehavior).
enum class SplitBehavior { kRemoved, kIsolated, kMergedWithPrevious, kMergedWithNext, kContiguous };

class PreTokenizer {
 public:
  static absl::StatusOr<PreTokenizer> FromJson(const nlohmann::json& config,
                                               std::string_view where);

  // Receives the words in order (`word` is valid until it returns); returns false to stop the
  // split. `at_origin`: the word starts at offset 0 of the input (PreToken::at_origin).
  using WordSink = absl::FunctionRef<bool(std::string_view word, bool at_origin)>;

  // Splits valid UTF-8 `text`, passing each word to `sink`; `at_origin` says whether the text
  // starts at offset 0 of the input. Returns false when the sink stopped the split.
  bool ForEachWord(std::string_view text, bool at_origin, WordSink sink) const;

  // All words of ForEachWord.
  std::vector<PreToken> Apply(std::string_view text, bool at_origin) const;

  // True when some step maps bytes to GPT-2 characters.
  bool byte_level() const { return byte_level_; }

 private:
  struct Step {
    enum class Kind { kSplit, kByteLevel, kMetaspace, kDigits, kWhitespace, kWhitespaceSplit };
    Kind kind;
    std::vector<TextPattern> pattern;  // kSplit (one), kByteLevel with regex (one)
    SplitBehavior behavior = SplitBehavior::kIsolated;
    bool invert = false;
    bool add_prefix_space = false;  // kByteLevel
    std::string replacement;        // kMetaspace
    enum class Prepend { kAlways, kFirst, kNever } prepend = Prepend::kAlways;
    bool split = true;               // kMetaspace
    bool individual_digits = false;  // kDigits
  };
  static absl::Status Parse(const nlohmann::json& config, std::string_view where,
                            std::vector<Step>* steps);
  // Runs steps_[step] and the steps after it on `text`.
  bool ApplyFrom(size_t step, std::string_view text, bool at_origin, WordSink sink) const;
  static bool ApplyStep(const Step& step, std::string_view text, bool at_origin, WordSink sink);

  std::vector<Step> steps_;
  bool byte_level_ = false;
};

}  // namespace tandem

#endif  // TANDEM_COMMON_TOKENIZER_PRE_TOKENIZER_H_
