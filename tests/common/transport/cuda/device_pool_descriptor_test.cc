#include "common/transport/cuda/device_pool_descriptor.h"

#include <gtest/gtest.h>

#include <string>

namespace tandem {
namespace {

DevicePoolDescriptor Sample() {
  DevicePoolDescriptor d;
  d.pool_bytes = uint64_t{80} << 30;
  d.host_id = "boot:5d7d43ea-10f2-4143-b37b-e27adf61df93";
  d.device_id = std::string("\x01\x02\x00\xff uuid-bytes..", 16);
  d.export_handle = std::string(72, '\x7f');
  d.inner_remote_key = std::string("\x00\x01packed-ucx-rkey", 17);
  d.landing_base = 0x7f0012340000;
  d.slot_bytes = 4 << 20;
  d.num_slots = 16;
  return d;
}

TEST(DevicePoolDescriptorTest, RoundTrips) {
  const DevicePoolDescriptor d = Sample();
  absl::StatusOr<DevicePoolDescriptor> back =
      DecodeDevicePoolDescriptor(EncodeDevicePoolDescriptor(d));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, d);
}

TEST(DevicePoolDescriptorTest, RoundTripsWithoutExportHandle) {
  DevicePoolDescriptor d = Sample();
  d.export_handle.clear();
  absl::StatusOr<DevicePoolDescriptor> back =
      DecodeDevicePoolDescriptor(EncodeDevicePoolDescriptor(d));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_TRUE(back->export_handle.empty());
  EXPECT_EQ(*back, d);
}

TEST(DevicePoolDescriptorTest, EveryTruncationIsRejected) {
  const std::string bytes = EncodeDevicePoolDescriptor(Sample());
  for (size_t n = 0; n < bytes.size(); ++n) {
    absl::StatusOr<DevicePoolDescriptor> d = DecodeDevicePoolDescriptor(bytes.substr(0, n));
    EXPECT_EQ(d.status().code(), absl::StatusCode::kInvalidArgument) << "length " << n;
  }
}

TEST(DevicePoolDescriptorTest, RejectsOtherBytes) {
  std::string bytes = EncodeDevicePoolDescriptor(Sample());
  EXPECT_FALSE(DecodeDevicePoolDescriptor(bytes + "x").ok());  // trailing bytes
  std::string bad_magic = bytes;
  bad_magic[0] ^= 1;
  EXPECT_NE(DecodeDevicePoolDescriptor(bad_magic).status().message().find("magic"),
            std::string::npos);
  std::string bad_version = bytes;
  bad_version[4] = 9;
  EXPECT_NE(DecodeDevicePoolDescriptor(bad_version).status().message().find("version 9"),
            std::string::npos);
  // A UCX remote key (what a plain ucx node publishes) is not a descriptor.
  EXPECT_FALSE(DecodeDevicePoolDescriptor("\x02\x00\x10ucx-rkey-bytes").ok());
  // A length field claiming more than is there.
  std::string long_length = bytes;
  long_length[4 + 2 + 8 + 3] = '\x7f';  // high byte of host_id's length
  EXPECT_FALSE(DecodeDevicePoolDescriptor(long_length).ok());
}

TEST(DevicePoolDescriptorTest, RejectsEmptyPoolAndEmptySlots) {
  DevicePoolDescriptor d = Sample();
  d.pool_bytes = 0;
  EXPECT_FALSE(DecodeDevicePoolDescriptor(EncodeDevicePoolDescriptor(d)).ok());
  d = Sample();
  d.slot_bytes = 0;
  EXPECT_FALSE(DecodeDevicePoolDescriptor(EncodeDevicePoolDescriptor(d)).ok());
}

TEST(HostIdentityTest, IsStableAndNamesTheBootId) {
  const std::string id = HostIdentity();
  EXPECT_FALSE(id.empty());
  EXPECT_EQ(id, HostIdentity());
  EXPECT_EQ(id.rfind("boot:", 0), 0u) << id;  // Linux has /proc/sys/kernel/random/boot_id
  EXPECT_GT(id.size(), 5u + 30u);
}

}  // namespace
}  // namespace tandem
