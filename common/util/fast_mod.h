// x % d for a divisor fixed ahead of many remainders, by multiplication instead of division
// (Lemire, Kaser and Kurz, "Faster Remainder by Direct Computation", 2019): with
// M = ceil(2^128 / d), x % d = ((M * x mod 2^128) * d) >> 128, exact for every 64-bit x and every
// d >= 1 (128 bits of M cover 64 of x plus 64 of d). About half the time of a 64-bit division on
// this machine; tandem-sim builds billions of trace tokens with one.
#ifndef TANDEM_COMMON_UTIL_FAST_MOD_H_
#define TANDEM_COMMON_UTIL_FAST_MOD_H_

#include <cstdint>

namespace tandem {

class FastMod {
 public:
  // d >= 1.
  explicit FastMod(uint64_t d) : d_(d), m_(~static_cast<unsigned __int128>(0) / d + 1) {}

  uint64_t operator()(uint64_t x) const {
    const unsigned __int128 low = m_ * x;  // mod 2^128
    const auto low_lo = static_cast<uint64_t>(low);
    const auto low_hi = static_cast<uint64_t>(low >> 64);
    // (low * d) >> 128, as 64-bit halves: low_hi * d plus the carry of low_lo * d.
    const unsigned __int128 top = static_cast<unsigned __int128>(low_hi) * d_ +
                                  ((static_cast<unsigned __int128>(low_lo) * d_) >> 64);
    return static_cast<uint64_t>(top >> 64);
  }

  uint64_t divisor() const { return d_; }

 private:
  uint64_t d_;
  unsigned __int128 m_;
};

}  // namespace tandem

#endif  // TANDEM_COMMON_UTIL_FAST_MOD_H_
