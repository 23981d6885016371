// PCRE2-backed Regex: compile options, per-thread match resources and the match loop.
#define PCRE2_CODE_UNIT_WIDTH 8
#include "common/tokenizer/regex.h"

#include <pcre2.h>

#include <algorithm>

#include "common/tokenizer/unicode/str_util.h"
#include "common/tokenizer/unicode/unicode_util.h"

namespace tandem {
namespace {

// Limits of one pcre2_match call. The match limit counts backtracking steps (per start position
// for the interpreter); the tokenizer patterns take a few steps per byte, so it grows with the
// text searched. The JIT stack holds backtracking state of JIT-compiled code; the heap limit
// plays that role for the interpreter.
constexpr uint32_t kBaseMatchLimit = 10'000'000;
constexpr uint32_t kMatchStepsPerByte = 16;
constexpr size_t kJitStackStart = 32 << 10;
constexpr size_t kJitStackMax = 8 << 20;
constexpr uint32_t kHeapLimitKiB = 64 << 10;

std::string ErrorMessage(int code) {
  PCRE2_UCHAR buffer[256];
  if (pcre2_get_error_message(code, buffer, sizeof(buffer)) < 0) return Cat("error ", code);
  return std::string(reinterpret_cast<const char*>(buffer));
}

// Match data, match context and JIT stack of the calling thread (pcre2 objects are not safe to
// share between concurrent matches; the compiled code is).
class ThreadMatchState {
 public:
  ThreadMatchState()
      : data_(pcre2_match_data_create(1, nullptr)), context_(pcre2_match_context_create(nullptr)) {
    stack_ = pcre2_jit_stack_create(kJitStackStart, kJitStackMax, nullptr);
    pcre2_jit_stack_assign(context_, nullptr, stack_);
    pcre2_set_heap_limit(context_, kHeapLimitKiB);
    pcre2_set_depth_limit(context_, kBaseMatchLimit);
  }
  ~ThreadMatchState() {
    pcre2_match_data_free(data_);
    pcre2_match_context_free(context_);
    pcre2_jit_stack_free(stack_);
  }
  ThreadMatchState(const ThreadMatchState&) = delete;
  ThreadMatchState& operator=(const ThreadMatchState&) = delete;

  bool ok() const { return data_ != nullptr && context_ != nullptr && stack_ != nullptr; }
  pcre2_match_data* data() { return data_; }
  pcre2_match_context* context(size_t bytes_to_search) {
    const uint64_t limit = kBaseMatchLimit + uint64_t{kMatchStepsPerByte} * bytes_to_search;
    pcre2_set_match_limit(context_, static_cast<uint32_t>(std::min<uint64_t>(limit, UINT32_MAX)));
    return context_;
  }

  static ThreadMatchState& Get() {
    thread_local ThreadMatchState state;
    return state;
  }

 private:
  pcre2_match_data* data_;
  pcre2_match_context* context_;
  pcre2_jit_stack* stack_ = nullptr;
};

absl::Status CheckUtf8(std::string_view text) {
  if (unicode::IsValidUtf8(text)) return absl::OkStatus();
  return absl::InvalidArgumentError("regex: the text is not valid UTF-8");
}

}  // namespace

struct Regex::Code {
  explicit Code(pcre2_code* c) : code(c) {}
  ~Code() { pcre2_code_free(code); }
  Code(const Code&) = delete;
  Code& operator=(const Code&) = delete;
  pcre2_code* code;
};

absl::StatusOr<Regex> Regex::Compile(std::string_view pattern) {
  auto translated = TranslateOnigurumaPattern(pattern);
  if (!translated.ok()) return translated.status();
  pcre2_compile_context* context = pcre2_compile_context_create(nullptr);
  if (context == nullptr) return absl::ResourceExhaustedError("pcre2_compile_context_create");
  pcre2_set_newline(context, PCRE2_NEWLINE_LF);
  // Oniguruma: ^ and $ are line anchors, ^ also after a final newline; . stops at '\n'.
  constexpr uint32_t kOptions =
      PCRE2_UTF | PCRE2_UCP | PCRE2_MULTILINE | PCRE2_ALT_CIRCUMFLEX | PCRE2_NEVER_BACKSLASH_C;
  int error = 0;
  PCRE2_SIZE error_offset = 0;
  pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(translated->data()),
                                   translated->size(), kOptions, &error, &error_offset, context);
  pcre2_compile_context_free(context);
  if (code == nullptr) {
    return absl::InvalidArgumentError(Cat("regex /", pattern, "/: ", ErrorMessage(error),
                                          " (at byte ", error_offset, " of the PCRE2 form /",
                                          *translated, "/)"));
  }
  // Without a JIT (an unsupported platform) pcre2_match interprets the pattern: slower, same
  // results, same limits.
  pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);
  Regex re;
  re.pattern_ = std::string(pattern);
  re.code_ = std::make_shared<const Code>(code);
  return re;
}

absl::StatusOr<bool> Regex::MatchFrom(std::string_view text, size_t start, size_t* match_begin,
                                      size_t* match_end) const {
  ThreadMatchState& state = ThreadMatchState::Get();
  if (!state.ok()) return absl::ResourceExhaustedError("regex: cannot allocate match state");
  const int rc =
      pcre2_match(code_->code, reinterpret_cast<PCRE2_SPTR>(text.data()), text.size(), start,
                  PCRE2_NO_UTF_CHECK, state.data(), state.context(text.size() - start));
  if (rc == PCRE2_ERROR_NOMATCH) return false;
  if (rc >= 0) {  // 0: the one-pair ovector was too small for the groups, the match is there
    const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(state.data());
    *match_begin = ovector[0];
    *match_end = std::max(ovector[0], ovector[1]);
    return true;
  }
  const std::string what =
      Cat("regex /", pattern_, "/: ", ErrorMessage(rc), " (search from byte ", start, ")");
  switch (rc) {
    case PCRE2_ERROR_MATCHLIMIT:
    case PCRE2_ERROR_DEPTHLIMIT:
    case PCRE2_ERROR_HEAPLIMIT:
    case PCRE2_ERROR_JIT_STACKLIMIT:
    case PCRE2_ERROR_NOMEMORY:
      return absl::ResourceExhaustedError(what);
    default:
      return absl::InternalError(what);
  }
}

absl::StatusOr<bool> Regex::Find(std::string_view text, size_t start, size_t* match_begin,
                                 size_t* match_end) const {
  if (absl::Status s = CheckUtf8(text); !s.ok()) return s;
  if (start > text.size()) return false;
  if (start < text.size() && (static_cast<unsigned char>(text[start]) & 0xC0) == 0x80) {
    return absl::InvalidArgumentError("regex: the search start is inside a UTF-8 sequence");
  }
  return MatchFrom(text, start, match_begin, match_end);
}

absl::Status Regex::ForEachMatch(std::string_view text,
                                 absl::FunctionRef<bool(size_t begin, size_t end)> on_match) const {
  if (absl::Status s = CheckUtf8(text); !s.ok()) return s;
  size_t pos = 0;
  while (pos <= text.size()) {
    size_t begin = 0, end = 0;
    absl::StatusOr<bool> found = MatchFrom(text, pos, &begin, &end);
    if (!found.ok()) return found.status();
    if (!*found) break;
    if (end == begin) {
      // Empty matches would only produce empty pieces, which Hugging Face drops.
      if (begin >= text.size()) break;
      pos = begin + static_cast<size_t>(
                        unicode::Utf8SequenceLength(static_cast<unsigned char>(text[begin])));
      continue;
    }
    if (!on_match(begin, end)) break;
    pos = end;
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<std::pair<size_t, size_t>>> Regex::FindAll(std::string_view text) const {
  std::vector<std::pair<size_t, size_t>> out;
  absl::Status s = ForEachMatch(text, [&out](size_t b, size_t e) {
    out.emplace_back(b, e);
    return true;
  });
  if (!s.ok()) return s;
  return out;
}

}  // namespace tandem
