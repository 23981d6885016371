#include "common/tokenizer/normalizer.h"

#include <unicode/locid.h>
#include <unicode/unistr.h>

#include "common/tokenizer/json_util.h"
#include "common/util/status_macros.h"

namespace tandem {
namespace {

std::string Lowercase(std::string_view text) {
  icu::UnicodeString s = icu::UnicodeString::fromUTF8(
      icu::StringPiece(text.data(), static_cast<int32_t>(text.size())));
  s.toLower(icu::Locale::getRoot());
  std::string out;
  s.toUTF8String(out);
  return out;
}

std::string Strip(std::string_view text, bool left, bool right) {
  const std::u32string cps = unicode::Utf8ToCodePoints(text);
  size_t b = 0, e = cps.size();
  if (left) {
    while (b < e && unicode::IsWhitespace(cps[b])) ++b;
  }
  if (right) {
    while (e > b && unicode::IsWhitespace(cps[e - 1])) --e;
  }
  return unicode::CodePointsToUtf8(std::u32string_view(cps).substr(b, e - b));
}

}  // namespace

absl::StatusOr<Normalizer> Normalizer::FromJson(const nlohmann::json& config,
                                                std::string_view where) {
  Normalizer n;
  if (!config.is_null()) RETURN_IF_ERROR(Parse(config, where, &n.steps_));
  return n;
}

absl::Status Normalizer::Parse(const nlohmann::json& config, std::string_view where,
                               std::vector<Step>* steps) {
  ASSIGN_OR_RETURN(const std::string type, json_util::GetType(config, where));
  using K = Step::Kind;
  using F = unicode::NormalizationForm;
  if (type == "Sequence") {
    auto it = config.find("normalizers");
    if (it == config.end() || !it->is_array()) {
      return json_util::FieldError(json_util::Field(where, "normalizers"), "expected an array");
    }
    for (size_t i = 0; i < it->size(); ++i) {
      RETURN_IF_ERROR(Parse((*it)[i], Cat(where, ".normalizers[", i, "]"), steps));
    }
    return absl::OkStatus();
  }
  Step step;
  if (type == "NFC" || type == "NFD" || type == "NFKC" || type == "NFKD") {
    step.kind = K::kUnicode;
    step.form = type == "NFC"    ? F::kNFC
                : type == "NFD"  ? F::kNFD
                : type == "NFKC" ? F::kNFKC
                                 : F::kNFKD;
  } else if (type == "Prepend") {
    step.kind = K::kPrepend;
    ASSIGN_OR_RETURN(step.text, json_util::GetString(config, "prepend", "", where));
  } else if (type == "Replace") {
    step.kind = K::kReplace;
    auto it = config.find("pattern");
    if (it == config.end()) return json_util::FieldError(where, "missing 'pattern'");
    ASSIGN_OR_RETURN(auto pattern, TextPattern::FromJson(*it, json_util::Field(where, "pattern")));
    step.pattern.push_back(std::move(pattern));
    ASSIGN_OR_RETURN(step.text, json_util::GetString(config, "content", "", where));
  } else if (type == "Lowercase") {
    step.kind = K::kLowercase;
  } else if (type == "Strip") {
    step.kind = K::kStrip;
    ASSIGN_OR_RETURN(step.strip_left, json_util::GetBool(config, "strip_left", true, where));
    ASSIGN_OR_RETURN(step.strip_right, json_util::GetBool(config, "strip_right", true, where));
  } else {
    return json_util::FieldError(json_util::Field(where, "type"),
                                 Cat("normalizer type '", type, "' is not supported"));
  }
  steps->push_back(std::move(step));
  return absl::OkStatus();
}

std::string Normalizer::Apply(std::string_view text) const {
  std::string s(text);
  for (const Step& step : steps_) {
    switch (step.kind) {
      case Step::Kind::kUnicode: {
        auto r = unicode::Normalize(s, step.form);
        if (r.ok()) s = std::move(*r);
        break;
      }
      case Step::Kind::kPrepend:
        if (!s.empty()) s = step.text + s;
        break;
      case Step::Kind::kReplace:
        s = step.pattern[0].ReplaceAll(s, step.text);
        break;
      case Step::Kind::kLowercase:
        s = Lowercase(s);
        break;
      case Step::Kind::kStrip:
        s = Strip(s, step.strip_left, step.strip_right);
        break;
    }
  }
  return s;
}

}  // namespace tandem
