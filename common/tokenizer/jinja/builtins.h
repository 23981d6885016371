// Jinja built-ins: filters, tests, methods of str/dict/list, and global functions, with the
// behaviour of Jinja2 3.1 as configured by Hugging Face transformers for chat templates (e.g.
// `tojson` is json.dumps with ensure_ascii=False and insertion-ordered keys).
#ifndef TANDEM_COMMON_TOKENIZER_JINJA_BUILTINS_H_
#define TANDEM_COMMON_TOKENIZER_JINJA_BUILTINS_H_

#include <optional>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "common/tokenizer/jinja/value.h"

namespace tandem::jinja {

// Applies filter `name` to `input` (`input | name(args)`).
absl::StatusOr<Value> ApplyFilter(std::string_view name, const Value& input, const CallArgs& args);

// Evaluates test `name` on `input` (`input is name(args)`).
absl::StatusOr<bool> ApplyTest(std::string_view name, const Value& input, const CallArgs& args);

// The method `name` of `object` bound to it (`"a,b".split`, `d.items`), if it has one.
std::optional<Value> GetMethod(const Value& object, std::string_view name);

// Calls the method `name` of `object` (e.g. "upper") with `args`; an error if it has none.
absl::StatusOr<Value> CallMethod(const Value& object, std::string_view name,
                                 const CallArgs& args = {});

// Adds range(), namespace() and dict() to `globals` (existing entries win).
void AddDefaultGlobals(ValueDict* globals);

// Python-style helpers shared with the interpreter.
// Code point length of a UTF-8 string.
size_t CodePointLength(const std::string& s);
// seq[start:stop:step] for lists and strings; missing bounds are nullopt.
absl::StatusOr<Value> SliceValue(const Value& seq, std::optional<int64_t> start,
                                 std::optional<int64_t> stop, std::optional<int64_t> step);
// The items iterated by `for x in value` (dict keys, string characters, list items).
absl::StatusOr<ValueList> Iterate(const Value& value);

}  // namespace tandem::jinja

#endif  // TANDEM_COMMON_TOKENIZER_JINJA_BUILTINS_H_
