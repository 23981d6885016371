#include "common/tokenizer/decoder.h"

#include "absl/strings/str_join.h"
#include "common/tokenizer/byte_level.h"
#include "common/tokenizer/json_util.h"
#include "common/tokenizer/unicode/unicode_util.h"
#include "common/util/status_macros.h"

namespace tandem {
namespace {

// The byte of a "<0xNN>" token.
std::optional<unsigned char> ByteToken(std::string_view t) {
  if (t.size() != 6 || t.substr(0, 3) != "<0x" || t[5] != '>') return std::nullopt;
  int value = 0;
  for (char c : t.substr(3, 2)) {
    int d;
    if (c >= '0' && c <= '9') {
      d = c - '0';
    } else if (c >= 'a' && c <= 'f') {
      d = c - 'a' + 10;
    } else if (c >= 'A' && c <= 'F') {
      d = c - 'A' + 10;
    } else {
      return std::nullopt;
    }
    value = value * 16 + d;
  }
  return static_cast<unsigned char>(value);
}

}  // namespace

absl::StatusOr<Decoder> Decoder::FromJson(const nlohmann::json& config, std::string_view where) {
  Decoder d;
  if (!config.is_null()) {
    d.present_ = true;
    RETURN_IF_ERROR(Parse(config, where, &d.steps_));
  }
  return d;
}

absl::Status Decoder::Parse(const nlohmann::json& config, std::string_view where,
                            std::vector<Step>* steps) {
  ASSIGN_OR_RETURN(const std::string type, json_util::GetType(config, where));
  using K = Step::Kind;
  if (type == "Sequence") {
    auto it = config.find("decoders");
    if (it == config.end() || !it->is_array()) {
      return json_util::FieldError(json_util::Field(where, "decoders"), "expected an array");
    }
    for (size_t i = 0; i < it->size(); ++i) {
      RETURN_IF_ERROR(Parse((*it)[i], Cat(where, ".decoders[", i, "]"), steps));
    }
    return absl::OkStatus();
  }
  Step step;
  if (type == "ByteLevel") {
    step.kind = K::kByteLevel;
  } else if (type == "ByteFallback") {
    step.kind = K::kByteFallback;
  } else if (type == "Fuse") {
    step.kind = K::kFuse;
  } else if (type == "Replace") {
    step.kind = K::kReplace;
    auto it = config.find("pattern");
    if (it == config.end()) return json_util::FieldError(where, "missing 'pattern'");
    ASSIGN_OR_RETURN(auto pattern, TextPattern::FromJson(*it, json_util::Field(where, "pattern")));
    step.pattern.push_back(std::move(pattern));
    ASSIGN_OR_RETURN(step.content, json_util::GetString(config, "content", "", where));
  } else if (type == "Strip") {
    step.kind = K::kStrip;
    ASSIGN_OR_RETURN(step.content, json_util::GetString(config, "content", " ", where));
    ASSIGN_OR_RETURN(step.start, json_util::GetInt(config, "start", 0, where));
    ASSIGN_OR_RETURN(step.stop, json_util::GetInt(config, "stop", 0, where));
  } else if (type == "Metaspace") {
    step.kind = K::kMetaspace;
    ASSIGN_OR_RETURN(step.content, json_util::GetString(config, "replacement", "\u2581", where));
    ASSIGN_OR_RETURN(const bool add_prefix_space,
                     json_util::GetBool(config, "add_prefix_space", true, where));
    ASSIGN_OR_RETURN(const std::string scheme,
                     json_util::GetString(config, "prepend_scheme",
                                          add_prefix_space ? "always" : "never", where));
    step.strip_first = scheme != "never";
  } else {
    return json_util::FieldError(json_util::Field(where, "type"),
                                 Cat("decoder type '", type, "' is not supported"));
  }
  steps->push_back(std::move(step));
  return absl::OkStatus();
}

void Decoder::ApplyStep(const Step& step, bool raw, std::vector<std::string>* tokens) {
  using K = Step::Kind;
  switch (step.kind) {
    case K::kByteLevel: {
      // Every token's characters map back to bytes (tokens with unmapped characters, such as
      // some added tokens, are taken as they are); all bytes then form one string.
      std::string bytes;
      for (const std::string& t : *tokens) {
        if (auto b = byte_level::Decode(t)) {
          bytes += *b;
        } else {
          bytes += t;
        }
      }
      tokens->assign(1, raw ? std::move(bytes) : unicode::Utf8Lossy(bytes));
      return;
    }
    case K::kReplace:
      for (std::string& t : *tokens) t = step.pattern[0].ReplaceAll(t, step.content);
      return;
    case K::kByteFallback: {
      std::vector<std::string> out;
      std::string run;
      size_t run_tokens = 0;
      auto flush = [&] {
        if (run_tokens == 0) return;
        if (raw || unicode::IsValidUtf8(run)) {
          out.push_back(std::move(run));
        } else {
          // Hugging Face replaces every byte of an invalid run.
          for (size_t i = 0; i < run_tokens; ++i) out.emplace_back("\xEF\xBF\xBD");
        }
        run.clear();
        run_tokens = 0;
      };
      for (std::string& t : *tokens) {
        if (auto b = ByteToken(t)) {
          run.push_back(static_cast<char>(*b));
          ++run_tokens;
        } else {
          flush();
          out.push_back(std::move(t));
        }
      }
      flush();
      *tokens = std::move(out);
      return;
    }
    case K::kFuse:
      tokens->assign(1, absl::StrJoin(*tokens, ""));
      return;
    case K::kStrip: {
      const std::string& c = step.content;
      if (c.empty()) return;
      for (std::string& t : *tokens) {
        size_t b = 0, e = t.size();
        for (int64_t i = 0; i < step.start && t.compare(b, c.size(), c) == 0 && b < e; ++i) {
          b += c.size();
        }
        for (int64_t i = 0;
             i < step.stop && e >= b + c.size() && t.compare(e - c.size(), c.size(), c) == 0; ++i) {
          e -= c.size();
        }
        t = t.substr(b, e - b);
      }
      return;
    }
    case K::kMetaspace: {
      const TextPattern rep = TextPattern::Literal(step.content);
      for (size_t i = 0; i < tokens->size(); ++i) {
        // In the first token every replacement character is dropped (Hugging Face's rule).
        (*tokens)[i] = rep.ReplaceAll((*tokens)[i], i == 0 && step.strip_first ? "" : " ");
      }
      return;
    }
  }
}

std::string Decoder::Decode(std::vector<std::string> tokens, bool raw) const {
  if (!present_) return absl::StrJoin(tokens, " ");
  for (const Step& step : steps_) ApplyStep(step, raw, &tokens);
  std::string out = absl::StrJoin(tokens, "");
  if (!raw && !unicode::IsValidUtf8(out)) out = unicode::Utf8Lossy(out);
  return out;
}

}  // namespace tandem
