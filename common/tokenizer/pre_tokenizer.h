// The tokenizer.json "pre_tokenizer": splits normalized text into words before BPE.
// Supported: Split (regex or string; Isolated/Removed/MergedWithPrevious/MergedWithNext/
// Contiguous; invert), ByteLevel (GPT-2 regex optional, bytes mapped to characters), Metaspace
// (prepend_scheme always/first/never, split), Digits, Whitespace, WhitespaceSplit, Sequence.
#ifndef TANDEM_COMMON_TOKENIZER_PRE_TOKENIZER_H_
#define TANDEM_COMMON_TOKENIZER_PRE_TOKENIZER_H_

#include <string>
#include <string_view>
#include <vector>

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

  // Splits `text`; `at_origin` says whether it starts at offset 0 of the input.
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
  static void ApplyStep(const Step& step, PreToken piece, std::vector<PreToken>* out);

  std::vector<Step> steps_;
  bool byte_level_ = false;
};

}  // namespace tandem

#endif  // TANDEM_COMMON_TOKENIZER_PRE_TOKENIZER_H_
