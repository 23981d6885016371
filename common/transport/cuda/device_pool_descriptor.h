// What an owner's CudaKvTransport publishes as its pool_remote_key(): everything a writer needs to
// reach a KV pool in device memory, by either path.
//
//  - Same host (equal host ids) and a device this process can see (equal device ids): the pool's
//    export handle (a cudaIpcMemHandle_t, or the host stand-in's memfd), opened once and copied
//    into directly.
//  - Anywhere else: the staged path through the inner transport. The owner's pinned landing
//    region (num_slots slots of slot_bytes each, starting at landing_base in the inner transport's
//    registered memory) and the inner transport's remote key for it.
//
// Wire form: magic "TKVD", a version, then fixed little-endian fields and length-prefixed byte
// strings (common/transport/cuda/byte_codec.h). Decoding checks every length.
#ifndef TANDEM_COMMON_TRANSPORT_CUDA_DEVICE_POOL_DESCRIPTOR_H_
#define TANDEM_COMMON_TRANSPORT_CUDA_DEVICE_POOL_DESCRIPTOR_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace tandem {

struct DevicePoolDescriptor {
  uint64_t pool_bytes = 0;
  // Which machine (HostIdentity()) and which device (MemoryCopier::device_id()) hold the pool.
  std::string host_id;
  std::string device_id;
  // The pool's export handle for same-host peers; empty when the owner could not export it.
  std::string export_handle;
  // The staged path: the inner transport's key for the owner's landing region, where the region
  // starts in the owner's address space, and its slots.
  std::string inner_remote_key;
  uint64_t landing_base = 0;
  uint64_t slot_bytes = 0;
  uint32_t num_slots = 0;

  bool operator==(const DevicePoolDescriptor&) const = default;
};

inline constexpr uint32_t kDevicePoolDescriptorMagic = 0x44564b54;  // "TKVD" little-endian
inline constexpr uint16_t kDevicePoolDescriptorVersion = 1;

std::string EncodeDevicePoolDescriptor(const DevicePoolDescriptor& descriptor);
// InvalidArgument when `bytes` is not a descriptor of this version (names what is wrong).
absl::StatusOr<DevicePoolDescriptor> DecodeDevicePoolDescriptor(std::string_view bytes);

// This machine's identity for "same host" decisions: the kernel's boot id
// (/proc/sys/kernel/random/boot_id), which processes in containers on one host share, plus the
// host name as a fallback when the boot id cannot be read.
std::string HostIdentity();

}  // namespace tandem

#endif  // TANDEM_COMMON_TRANSPORT_CUDA_DEVICE_POOL_DESCRIPTOR_H_
