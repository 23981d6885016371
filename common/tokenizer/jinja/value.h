// Values of the Jinja interpreter, with Python semantics: None, booleans, integers, floats,
// strings, lists, insertion-ordered dicts (Python dicts keep insertion order, which tojson
// must preserve), callables, and Jinja's Undefined. Lists and dicts are shared by reference,
// as in Python, so `namespace()` objects can be updated from inner scopes.
#ifndef TANDEM_COMMON_TOKENIZER_JINJA_VALUE_H_
#define TANDEM_COMMON_TOKENIZER_JINJA_VALUE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace tandem::jinja {

class Value;
using ValueList = std::vector<Value>;

// Insertion-ordered string-keyed map.
class ValueDict {
 public:
  const Value* Find(std::string_view key) const;
  Value* Find(std::string_view key);
  void Set(std::string key, Value value);
  void Clear();
  const std::vector<std::pair<std::string, Value>>& items() const { return items_; }
  size_t size() const;        // defined below, where Value is complete
  bool is_namespace = false;  // created by namespace(): attributes may be assigned

 private:
  std::vector<std::pair<std::string, Value>> items_;
};

// Arguments of a call: positional and keyword.
struct CallArgs {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> keyword;
  // The argument at `index` or with `name`, if given.
  const Value* Get(size_t index, std::string_view name) const;
};

using Function = std::function<absl::StatusOr<Value>(const CallArgs&)>;

class Value {
 public:
  struct Undefined {
    std::string name;  // what was looked up, for error messages
  };
  struct None {};

  Value() : v_(Undefined{}) {}
  static Value MakeUndefined(std::string name) {
    Value v;
    v.v_.emplace<Undefined>(Undefined{std::move(name)});
    return v;
  }
  static Value MakeNone() {
    Value v;
    v.v_.emplace<None>();
    return v;
  }
  Value(bool b) : v_(b) {}                                                     // NOLINT
  Value(int64_t i) : v_(i) {}                                                  // NOLINT
  Value(int i) : v_(static_cast<int64_t>(i)) {}                                // NOLINT
  Value(double d) : v_(d) {}                                                   // NOLINT
  Value(std::string s) : v_(std::move(s)) {}                                   // NOLINT
  Value(const char* s) : v_(std::string(s)) {}                                 // NOLINT
  Value(ValueList list) : v_(std::make_shared<ValueList>(std::move(list))) {}  // NOLINT
  // A Python tuple: a list that prints as (a, b) and never equals a list.
  static Value MakeTuple(ValueList items) {
    Value v(std::move(items));
    v.tuple_ = true;
    return v;
  }
  Value(ValueDict dict) : v_(std::make_shared<ValueDict>(std::move(dict))) {}  // NOLINT
  Value(Function fn) : v_(std::make_shared<Function>(std::move(fn))) {}        // NOLINT

  // From JSON (objects keep their key order).
  static Value FromJson(const nlohmann::ordered_json& json);

  bool is_undefined() const { return std::holds_alternative<Undefined>(v_); }
  bool is_none() const { return std::holds_alternative<None>(v_); }
  bool is_bool() const { return std::holds_alternative<bool>(v_); }
  bool is_int() const { return std::holds_alternative<int64_t>(v_); }
  bool is_float() const { return std::holds_alternative<double>(v_); }
  bool is_number() const { return is_int() || is_float(); }
  bool is_string() const { return std::holds_alternative<std::string>(v_); }
  // Lists and tuples.
  bool is_list() const { return std::holds_alternative<std::shared_ptr<ValueList>>(v_); }
  bool is_tuple() const { return tuple_; }
  bool is_dict() const { return std::holds_alternative<std::shared_ptr<ValueDict>>(v_); }
  bool is_callable() const { return std::holds_alternative<std::shared_ptr<Function>>(v_); }

  bool as_bool() const { return std::get<bool>(v_); }
  int64_t as_int() const { return std::get<int64_t>(v_); }
  // Integer or float (booleans count as 0/1, as in Python).
  double as_double() const;
  const std::string& as_string() const { return std::get<std::string>(v_); }
  const ValueList& as_list() const { return *std::get<std::shared_ptr<ValueList>>(v_); }
  ValueList& mutable_list() { return *std::get<std::shared_ptr<ValueList>>(v_); }
  const ValueDict& as_dict() const { return *std::get<std::shared_ptr<ValueDict>>(v_); }
  ValueDict& mutable_dict() const { return *std::get<std::shared_ptr<ValueDict>>(v_); }
  const Function& as_function() const { return *std::get<std::shared_ptr<Function>>(v_); }
  const std::string& undefined_name() const { return std::get<Undefined>(v_).name; }

  // Python truthiness (Undefined is false).
  bool Truthy() const;
  // Python str(): what {{ value }} prints. Undefined prints as "".
  std::string Str() const;
  // Python repr().
  std::string Repr() const;
  // Python json.dumps(value, ensure_ascii=False, indent=indent, sort_keys=sort_keys).
  absl::StatusOr<std::string> ToJson(std::optional<int> indent, bool sort_keys = false) const;
  // A type name for error messages ("str", "list", ...).
  std::string TypeName() const;

  // Python ==.
  bool Equals(const Value& other) const;
  // Python <; fails for incomparable types.
  absl::StatusOr<bool> Less(const Value& other) const;

 private:
  using Storage =
      std::variant<Undefined, None, bool, int64_t, double, std::string, std::shared_ptr<ValueList>,
                   std::shared_ptr<ValueDict>, std::shared_ptr<Function>>;
  Storage v_;
  bool tuple_ = false;
};

inline size_t ValueDict::size() const { return items_.size(); }
inline void ValueDict::Clear() { items_.clear(); }

// Python repr of a float ("1.0", "0.1", "1e-05", "inf").
std::string FormatFloat(double d);

}  // namespace tandem::jinja

#endif  // TANDEM_COMMON_TOKENIZER_JINJA_VALUE_H_
