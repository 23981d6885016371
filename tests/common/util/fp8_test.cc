#include "common/util/fp8.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "gtest/gtest.h"

namespace tandem {
namespace {

// The value of code c from the OCP 8-bit float spec, computed independently of the decoder:
// (-1)^s * 2^(e-7) * (1 + m/8) for e > 0, (-1)^s * 2^-6 * (m/8) for e == 0; S.1111.111 is NaN.
double SpecValue(int c) {
  const int s = c >> 7, e = (c >> 3) & 15, m = c & 7;
  if (e == 15 && m == 7) return std::numeric_limits<double>::quiet_NaN();
  const double mag = e == 0 ? std::pow(2.0, -6) * (m / 8.0) : std::pow(2.0, e - 7) * (1 + m / 8.0);
  return s ? -mag : mag;
}

TEST(Fp8E4M3Test, DecodesEveryCodeAsTheSpecSays) {
  for (int c = 0; c < 256; ++c) {
    const float got = Fp8E4M3ToF32(static_cast<uint8_t>(c));
    const double want = SpecValue(c);
    if (std::isnan(want)) {
      EXPECT_TRUE(std::isnan(got)) << "code " << c;
    } else {
      EXPECT_EQ(static_cast<double>(got), want) << "code " << c;
      EXPECT_EQ(std::signbit(got), c >= 128) << "code " << c;
    }
  }
}

TEST(Fp8E4M3Test, HandValues) {
  EXPECT_EQ(Fp8E4M3ToF32(0x00), 0.0f);
  EXPECT_EQ(Fp8E4M3ToF32(0x38), 1.0f);    // e = 7, m = 0
  EXPECT_EQ(Fp8E4M3ToF32(0x3c), 1.5f);    // m = 4
  EXPECT_EQ(Fp8E4M3ToF32(0x7e), 448.0f);  // the largest finite
  EXPECT_EQ(Fp8E4M3ToF32(0xfe), -448.0f);
  EXPECT_EQ(Fp8E4M3ToF32(0x08), 0.015625f);     // smallest normal 2^-6
  EXPECT_EQ(Fp8E4M3ToF32(0x01), 0.001953125f);  // smallest subnormal 2^-9
  EXPECT_EQ(Fp8E4M3ToF32(0x07), 0.013671875f);  // largest subnormal 7 * 2^-9
  EXPECT_EQ(Fp8E4M3ToF32(0x40), 2.0f);
  EXPECT_EQ(Fp8E4M3ToF32(0xc4), -3.0f);

  EXPECT_EQ(F32ToFp8E4M3(1.0f), 0x38);
  EXPECT_EQ(F32ToFp8E4M3(-2.0f), 0xc0);
  EXPECT_EQ(F32ToFp8E4M3(448.0f), 0x7e);
  EXPECT_EQ(F32ToFp8E4M3(0.001953125f), 0x01);
  EXPECT_EQ(F32ToFp8E4M3(0.0f), 0x00);
  EXPECT_EQ(F32ToFp8E4M3(-0.0f), 0x80);
}

TEST(Fp8E4M3Test, EncodeRoundTripsEveryFiniteCode) {
  for (int c = 0; c < 256; ++c) {
    if ((c & 0x7f) == 0x7f) continue;  // NaN
    EXPECT_EQ(F32ToFp8E4M3(Fp8E4M3ToF32(static_cast<uint8_t>(c))), c) << "code " << c;
  }
}

TEST(Fp8E4M3Test, RoundsToNearestTiesToEven) {
  // Between 1.0 (0x38, even) and 1.125 (0x39, odd): the midpoint goes to the even code.
  EXPECT_EQ(F32ToFp8E4M3(1.0625f), 0x38);
  EXPECT_EQ(F32ToFp8E4M3(std::nextafter(1.0625f, 2.0f)), 0x39);
  EXPECT_EQ(F32ToFp8E4M3(std::nextafter(1.0625f, 0.0f)), 0x38);
  // Between 1.125 (0x39) and 1.25 (0x3a, even): the midpoint goes up to the even code.
  EXPECT_EQ(F32ToFp8E4M3(1.1875f), 0x3a);
  // A carry out of the mantissa: 1.9375 (between 1.875, 0x3f, odd, and 2.0) goes to 2.0 (0x40).
  EXPECT_EQ(F32ToFp8E4M3(1.9375f), 0x40);
  // Subnormals: 1.5 * 2^-9 sits between 0x01 (odd) and 0x02: ties to 0x02; 2.5 * 2^-9 to 0x02.
  EXPECT_EQ(F32ToFp8E4M3(1.5f * 0.001953125f), 0x02);
  EXPECT_EQ(F32ToFp8E4M3(2.5f * 0.001953125f), 0x02);
  // Half the smallest subnormal ties to zero; just above it rounds up.
  EXPECT_EQ(F32ToFp8E4M3(0.5f * 0.001953125f), 0x00);
  EXPECT_EQ(F32ToFp8E4M3(std::nextafter(0.5f * 0.001953125f, 1.0f)), 0x01);
  // Between the largest subnormal (7 * 2^-9, odd) and the smallest normal (8 * 2^-9, 0x08).
  EXPECT_EQ(F32ToFp8E4M3(7.5f * 0.001953125f), 0x08);
  // f32 denormals are far below half the smallest subnormal.
  EXPECT_EQ(F32ToFp8E4M3(std::numeric_limits<float>::denorm_min()), 0x00);
  EXPECT_EQ(F32ToFp8E4M3(-std::numeric_limits<float>::denorm_min()), 0x80);
}

TEST(Fp8E4M3Test, EveryMidpointTiesToTheEvenNeighbour) {
  // Walk the positive finite codes: the midpoint of each adjacent pair goes to the even one, and
  // values just either side go to the nearer one.
  for (int c = 0; c < 0x7e; ++c) {
    const float lo = Fp8E4M3ToF32(static_cast<uint8_t>(c));
    const float hi = Fp8E4M3ToF32(static_cast<uint8_t>(c + 1));
    const float mid = 0.5f * (lo + hi);  // exact: both have few mantissa bits
    const int even = (c % 2 == 0) ? c : c + 1;
    EXPECT_EQ(F32ToFp8E4M3(mid), even) << "between codes " << c << " and " << c + 1;
    EXPECT_EQ(F32ToFp8E4M3(std::nextafter(mid, 0.0f)), c) << "below the midpoint of " << c;
    EXPECT_EQ(F32ToFp8E4M3(std::nextafter(mid, 1000.0f)), c + 1) << "above the midpoint of " << c;
    EXPECT_EQ(F32ToFp8E4M3(-mid), 0x80 | even);
  }
}

TEST(Fp8E4M3Test, SaturatesAndKeepsNan) {
  EXPECT_EQ(F32ToFp8E4M3(449.0f), 0x7e);
  EXPECT_EQ(F32ToFp8E4M3(464.0f), 0x7e);  // the midpoint to what would be 480
  EXPECT_EQ(F32ToFp8E4M3(1e6f), 0x7e);
  EXPECT_EQ(F32ToFp8E4M3(-1e30f), 0xfe);
  EXPECT_EQ(F32ToFp8E4M3(std::numeric_limits<float>::infinity()), 0x7e);
  EXPECT_EQ(F32ToFp8E4M3(-std::numeric_limits<float>::infinity()), 0xfe);
  EXPECT_EQ(F32ToFp8E4M3(std::numeric_limits<float>::quiet_NaN()) & 0x7f, 0x7f);
  EXPECT_EQ(F32ToFp8E4M3(std::nextafter(448.0f, 0.0f)), 0x7e);  // just below: still 448
  EXPECT_EQ(F32ToFp8E4M3(432.0f), 0x7e);                        // midpoint 416|448, 448 even
  EXPECT_EQ(F32ToFp8E4M3(std::nextafter(432.0f, 0.0f)), 0x7d);
}

TEST(Fp8E4M3Test, RelativeErrorIsAtMostOneSixteenthInTheNormalRange) {
  // Sweep magnitudes from 2^-6 to 448 on a fine geometric grid.
  for (double x = 0.015625; x <= 448.0; x *= 1.0009) {
    const float f = static_cast<float>(x);
    const float back = Fp8E4M3ToF32(F32ToFp8E4M3(f));
    EXPECT_LE(std::fabs(back - f), f / 16.0f + 1e-12f) << x;
  }
}

}  // namespace
}  // namespace tandem
