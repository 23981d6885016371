// Checked 64-bit integer arithmetic for the Jinja interpreter. Python's integers never overflow;
// chat templates never need more than 64 bits, so where Python would grow a big integer the
// interpreter fails the render with a clear error instead of wrapping (undefined behaviour).
#ifndef TANDEM_COMMON_TOKENIZER_JINJA_INT_MATH_H_
#define TANDEM_COMMON_TOKENIZER_JINJA_INT_MATH_H_

#include <cmath>
#include <cstdint>
#include <optional>
#include <string_view>

namespace tandem::jinja {

// a op b for op in + - * // % **, with Python's floor semantics for // and %; nullopt when the
// result does not fit in 64 bits. `b` must not be 0 for // and %, nor negative for **.
inline std::optional<int64_t> CheckedIntOp(std::string_view op, int64_t a, int64_t b) {
  int64_t r = 0;
  if (op == "+") return __builtin_add_overflow(a, b, &r) ? std::nullopt : std::optional(r);
  if (op == "-") return __builtin_sub_overflow(a, b, &r) ? std::nullopt : std::optional(r);
  if (op == "*") return __builtin_mul_overflow(a, b, &r) ? std::nullopt : std::optional(r);
  if (op == "//" || op == "%") {
    if (a == INT64_MIN && b == -1) return op == "%" ? std::optional<int64_t>(0) : std::nullopt;
    int64_t q = a / b, m = a % b;
    if (m != 0 && ((m < 0) != (b < 0))) {
      --q;
      m += b;
    }
    return op == "//" ? q : m;
  }
  if (op == "**") {  // by squaring: O(log b) steps, whatever the exponent
    int64_t result = 1, base = a;
    for (int64_t e = b; e > 0; e >>= 1) {
      if ((e & 1) && __builtin_mul_overflow(result, base, &result)) return std::nullopt;
      if (e > 1 && __builtin_mul_overflow(base, base, &base)) {
        // base² overflows: only 0, 1 and -1 stay in range past here, and they never reach it.
        return std::nullopt;
      }
    }
    return result;
  }
  return std::nullopt;
}

// The integer part of `d` (truncated toward zero), or nullopt for NaN, infinities and values
// outside int64's range.
inline std::optional<int64_t> TruncateToInt64(double d) {
  if (!std::isfinite(d)) return std::nullopt;
  const double t = std::trunc(d);
  // 2^63 is exactly representable; every double below it (and ≥ -2^63) fits.
  if (t >= 9223372036854775808.0 || t < -9223372036854775808.0) return std::nullopt;
  return static_cast<int64_t>(t);
}

}  // namespace tandem::jinja

#endif  // TANDEM_COMMON_TOKENIZER_JINJA_INT_MATH_H_
