#include "common/transport/cuda/device_pool_descriptor.h"

#include <unistd.h>

#include <fstream>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "common/transport/cuda/byte_codec.h"

namespace tandem {

namespace {

// Upper bounds on the variable fields, so a corrupt length cannot make us allocate much.
constexpr size_t kMaxIdBytes = 256;
constexpr size_t kMaxHandleBytes = 4096;
constexpr size_t kMaxKeyBytes = 64 * 1024;

}  // namespace

std::string EncodeDevicePoolDescriptor(const DevicePoolDescriptor& d) {
  std::string out;
  transport_wire::ByteWriter w(&out);
  w.U32(kDevicePoolDescriptorMagic);
  w.U16(kDevicePoolDescriptorVersion);
  w.U64(d.pool_bytes);
  w.Bytes(d.host_id);
  w.Bytes(d.device_id);
  w.Bytes(d.export_handle);
  w.Bytes(d.inner_remote_key);
  w.U64(d.landing_base);
  w.U64(d.slot_bytes);
  w.U32(d.num_slots);
  return out;
}

absl::StatusOr<DevicePoolDescriptor> DecodeDevicePoolDescriptor(std::string_view bytes) {
  transport_wire::ByteReader r(bytes);
  uint32_t magic = 0;
  uint16_t version = 0;
  if (!r.U32(&magic) || magic != kDevicePoolDescriptorMagic) {
    return absl::InvalidArgumentError("not a device pool descriptor (bad magic)");
  }
  if (!r.U16(&version) || version != kDevicePoolDescriptorVersion) {
    return absl::InvalidArgumentError(absl::StrCat("device pool descriptor version ", version,
                                                   ", this build reads version ",
                                                   kDevicePoolDescriptorVersion));
  }
  DevicePoolDescriptor d;
  if (!r.U64(&d.pool_bytes) || !r.Bytes(&d.host_id, kMaxIdBytes) ||
      !r.Bytes(&d.device_id, kMaxIdBytes) || !r.Bytes(&d.export_handle, kMaxHandleBytes) ||
      !r.Bytes(&d.inner_remote_key, kMaxKeyBytes) || !r.U64(&d.landing_base) ||
      !r.U64(&d.slot_bytes) || !r.U32(&d.num_slots)) {
    return absl::InvalidArgumentError("device pool descriptor is truncated or has a bad length");
  }
  if (r.remaining() != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("device pool descriptor has ", r.remaining(), " trailing bytes"));
  }
  if (d.pool_bytes == 0) return absl::InvalidArgumentError("device pool descriptor: empty pool");
  if (d.num_slots > 0 && d.slot_bytes == 0) {
    return absl::InvalidArgumentError("device pool descriptor: landing slots of 0 bytes");
  }
  return d;
}

std::string HostIdentity() {
  std::ifstream f("/proc/sys/kernel/random/boot_id");
  std::string id;
  if (f && std::getline(f, id)) {
    id = std::string(absl::StripAsciiWhitespace(id));
    if (!id.empty()) return absl::StrCat("boot:", id);
  }
  char name[256] = {};
  gethostname(name, sizeof(name) - 1);
  return absl::StrCat("host:", name);
}

}  // namespace tandem
