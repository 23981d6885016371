#include "common/transport/cuda/nccl_frame.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace tandem {
namespace {

constexpr size_t kFrame = 1024;

std::string Encode(const NcclFrame& f, size_t frame_bytes = kFrame) {
  std::string out(frame_bytes, '\x55');
  absl::Status s = EncodeNcclFrame(f, out.data(), frame_bytes);
  EXPECT_TRUE(s.ok()) << s;
  return out;
}

TEST(NcclFrameTest, CopiesRoundTripAndPadWithZeros) {
  NcclFrame f;
  f.type = NcclFrameType::kCopies;
  f.sequence = 41;
  f.runs = {{0, 4096}, {uint64_t{3} << 33, 1}, {77, uint64_t{1} << 31}};
  const std::string bytes = Encode(f);
  ASSERT_EQ(bytes.size(), kFrame);
  const size_t used = kNcclFrameHeaderBytes + 16 * f.runs.size();
  EXPECT_EQ(bytes.find_first_not_of('\0', used), std::string::npos) << "padding is not zero";
  absl::StatusOr<NcclFrame> back = DecodeNcclFrame(bytes);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, f);
}

TEST(NcclFrameTest, NoticeRoundTrips) {
  NcclFrame f;
  f.type = NcclFrameType::kNotice;
  f.sequence = 0;
  f.payload = std::string("\x00\x01 completion \xff", 15);
  absl::StatusOr<NcclFrame> back = DecodeNcclFrame(Encode(f));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, f);
}

TEST(NcclFrameTest, CapacityIsExact) {
  EXPECT_EQ(NcclFrameMaxRuns(kFrame), (kFrame - kNcclFrameHeaderBytes) / 16);
  EXPECT_EQ(NcclFrameMaxPayload(kFrame), kFrame - kNcclFrameHeaderBytes);
  NcclFrame full;
  full.runs.resize(NcclFrameMaxRuns(kFrame), NcclRun{1, 2});
  std::string out(kFrame, '\0');
  EXPECT_TRUE(EncodeNcclFrame(full, out.data(), kFrame).ok());
  full.runs.push_back({3, 4});
  EXPECT_EQ(EncodeNcclFrame(full, out.data(), kFrame).code(), absl::StatusCode::kInvalidArgument);

  NcclFrame notice;
  notice.type = NcclFrameType::kNotice;
  notice.payload.assign(NcclFrameMaxPayload(kFrame), 'x');
  EXPECT_TRUE(EncodeNcclFrame(notice, out.data(), kFrame).ok());
  EXPECT_EQ(DecodeNcclFrame(out)->payload.size(), NcclFrameMaxPayload(kFrame));
  notice.payload.push_back('y');
  EXPECT_EQ(EncodeNcclFrame(notice, out.data(), kFrame).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE(EncodeNcclFrame(NcclFrame{}, out.data(), kNcclMinFrameBytes - 1).ok());
}

TEST(NcclFrameTest, RejectsGarbage) {
  EXPECT_FALSE(DecodeNcclFrame(std::string(kFrame, '\0')).ok());  // an unwritten frame
  NcclFrame f;
  f.runs = {{1, 2}};
  std::string bytes = Encode(f);
  std::string bad = bytes;
  bad[4] = 7;  // version
  EXPECT_NE(DecodeNcclFrame(bad).status().message().find("version"), std::string::npos);
  bad = bytes;
  bad[5] = 9;  // type
  EXPECT_NE(DecodeNcclFrame(bad).status().message().find("type"), std::string::npos);
  bad = bytes;
  bad[16] = '\xff';  // count: more runs than the frame holds
  bad[17] = '\xff';
  EXPECT_FALSE(DecodeNcclFrame(bad).ok());
  EXPECT_FALSE(DecodeNcclFrame(bytes.substr(0, 10)).ok());
}

TEST(NcclFrameTest, PlanSplitsCopiesIntoNumberedFrames) {
  const size_t frame_bytes = kNcclFrameHeaderBytes + 3 * 16;  // 3 runs a frame
  std::vector<KvCopy> copies;
  for (uint64_t i = 0; i < 8; ++i) copies.push_back({i * 100, i * 1000, i + 1});
  std::vector<NcclFrame> frames = PlanNcclCopyFrames(copies, frame_bytes, 10);
  ASSERT_EQ(frames.size(), 3u);
  size_t k = 0;
  for (size_t i = 0; i < frames.size(); ++i) {
    EXPECT_EQ(frames[i].sequence, 10 + i);
    EXPECT_EQ(frames[i].type, NcclFrameType::kCopies);
    for (const NcclRun& r : frames[i].runs) {
      EXPECT_EQ(r.dst_offset, copies[k].dst_offset);
      EXPECT_EQ(r.bytes, copies[k].bytes);
      ++k;
    }
    std::string out(frame_bytes, '\0');
    EXPECT_TRUE(EncodeNcclFrame(frames[i], out.data(), frame_bytes).ok());
  }
  EXPECT_EQ(k, copies.size());
  EXPECT_EQ(frames[2].runs.size(), 2u);
  EXPECT_TRUE(PlanNcclCopyFrames({}, frame_bytes, 0).empty());
}

}  // namespace
}  // namespace tandem

namespace tandem {
namespace {

TEST(NcclPoolKeyTest, RoundTripsAndRejectsOthers) {
  const NcclPoolKey key{uint64_t{70} << 30, 0xfeedface12345678};
  const std::string bytes = EncodeNcclPoolKey(key);
  absl::StatusOr<NcclPoolKey> back = DecodeNcclPoolKey(bytes);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, key);
  for (size_t n = 0; n < bytes.size(); ++n)
    EXPECT_FALSE(DecodeNcclPoolKey(bytes.substr(0, n)).ok());
  EXPECT_FALSE(DecodeNcclPoolKey(bytes + "x").ok());
  EXPECT_FALSE(DecodeNcclPoolKey("TKVD-a-device-pool-descriptor").ok());
}

}  // namespace
}  // namespace tandem
