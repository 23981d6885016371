#include "common/transport/cuda/staged_messages.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace tandem {
namespace {

std::vector<StagedMessage> Samples() {
  std::vector<StagedMessage> out;
  StagedMessage request;
  request.type = StagedMessageType::kRequest;
  request.writer_id = 0x1122334455667788;
  request.reply_address = std::string("\x00ucx-worker-address\xff", 21);
  request.transfer = 7;
  request.chunks = 129;
  request.time_left_ms = 29999;
  out.push_back(request);

  StagedMessage chunk;
  chunk.type = StagedMessageType::kChunk;
  chunk.writer_id = 3;
  chunk.reply_address = "w";
  chunk.transfer = 8;
  chunk.grants = {{5, 12345}};
  chunk.segments = {{0, 4096}, {1 << 30, 12}, {uint64_t{1} << 40, 4 << 20}};
  out.push_back(chunk);

  StagedMessage ret;
  ret.type = StagedMessageType::kReturn;
  ret.writer_id = 3;
  ret.grants = {{15, 9}};
  out.push_back(ret);

  StagedMessage notice;
  notice.type = StagedMessageType::kNotice;
  notice.writer_id = 3;
  notice.payload = std::string("\x08\x01\x10\x00 a KvCompletion", 20);
  out.push_back(notice);

  StagedMessage grant;
  grant.type = StagedMessageType::kGrant;
  grant.transfer = 8;
  grant.grants = {{0, 1}, {1, 2}, {7, 3}};
  out.push_back(grant);

  StagedMessage done;
  done.type = StagedMessageType::kChunkDone;
  done.transfer = 8;
  done.grants = {{5, 0}};
  done.status = absl::InvalidArgumentError("segment outside the pool");
  out.push_back(done);

  StagedMessage ok_done = done;
  ok_done.status = absl::OkStatus();
  out.push_back(ok_done);
  return out;
}

TEST(StagedMessagesTest, EveryTypeRoundTrips) {
  for (const StagedMessage& m : Samples()) {
    absl::StatusOr<StagedMessage> back = DecodeStagedMessage(EncodeStagedMessage(m));
    ASSERT_TRUE(back.ok()) << StagedMessageTypeName(m.type) << ": " << back.status();
    EXPECT_EQ(*back, m) << StagedMessageTypeName(m.type);
  }
}

TEST(StagedMessagesTest, EveryTruncationIsRejected) {
  for (const StagedMessage& m : Samples()) {
    const std::string bytes = EncodeStagedMessage(m);
    for (size_t n = 0; n < bytes.size(); ++n) {
      EXPECT_EQ(DecodeStagedMessage(bytes.substr(0, n)).status().code(),
                absl::StatusCode::kInvalidArgument)
          << StagedMessageTypeName(m.type) << " cut to " << n << " bytes";
    }
    EXPECT_FALSE(DecodeStagedMessage(bytes + '\0').ok()) << "trailing byte";
  }
}

TEST(StagedMessagesTest, RejectsUnknownTypeVersionAndHugeCounts) {
  std::string bytes = EncodeStagedMessage(Samples()[0]);
  std::string bad = bytes;
  bad[2] = 99;
  EXPECT_NE(DecodeStagedMessage(bad).status().message().find("unknown type"), std::string::npos);
  bad = bytes;
  bad[1] = 2;
  EXPECT_NE(DecodeStagedMessage(bad).status().message().find("version"), std::string::npos);
  bad = bytes;
  bad[0] = 0;
  EXPECT_FALSE(DecodeStagedMessage(bad).ok());
  // The grant count sits after magic, version, type, writer id, address, transfer, chunks and
  // time: a count of 2^32-1 must not be believed.
  StagedMessage m = Samples()[0];
  bytes = EncodeStagedMessage(m);
  const size_t count_at = 3 + 8 + 4 + m.reply_address.size() + 8 + 4 + 8;
  for (int i = 0; i < 4; ++i) bytes[count_at + i] = '\xff';
  EXPECT_FALSE(DecodeStagedMessage(bytes).ok());
}

}  // namespace
}  // namespace tandem
