// NcclKvTransport's header frames: the fixed-size message a writer sends before each group of
// data sends, telling the owner's receive loop what follows.
//
//   kCopies: `runs` data sends follow, in order, one per run: run i's bytes go to the owner
//            pool's [dst_offset, dst_offset + bytes).
//   kNotice: the user's notice payload, inline; nothing follows. The owner delivers it once the
//            frame arrived, which (one stream, in order) is after every earlier run.
//
// Every frame is exactly `frame_bytes` long (both sides agree on it: NcclKvTransportOptions) so
// the owner can post its receive before knowing what comes. Layout, little-endian: magic "TKNF",
// version, type, reserved u16, sequence number u64 (consecutive per communicator from 0: the owner
// checks it), count u32 (runs, or payload bytes), then the runs (u64 dst_offset, u64 bytes) or the
// payload, then zeros. Pure C++: no CUDA or NCCL needed to build or test it.
#ifndef TANDEM_COMMON_TRANSPORT_CUDA_NCCL_FRAME_H_
#define TANDEM_COMMON_TRANSPORT_CUDA_NCCL_FRAME_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/transport/kv_transport.h"

namespace tandem {

enum class NcclFrameType : uint8_t { kCopies = 1, kNotice = 2 };

struct NcclRun {
  uint64_t dst_offset = 0;
  uint64_t bytes = 0;
  bool operator==(const NcclRun&) const = default;
};

struct NcclFrame {
  NcclFrameType type = NcclFrameType::kCopies;
  uint64_t sequence = 0;
  std::vector<NcclRun> runs;  // kCopies
  std::string payload;        // kNotice
  bool operator==(const NcclFrame&) const = default;
};

inline constexpr uint32_t kNcclFrameMagic = 0x464e4b54;  // "TKNF" little-endian
inline constexpr uint8_t kNcclFrameVersion = 1;
inline constexpr size_t kNcclFrameHeaderBytes = 4 + 1 + 1 + 2 + 8 + 4;
// The smallest frame that holds one run.
inline constexpr size_t kNcclMinFrameBytes = kNcclFrameHeaderBytes + 16;

// Runs and payload bytes one frame of `frame_bytes` can carry.
size_t NcclFrameMaxRuns(size_t frame_bytes);
size_t NcclFrameMaxPayload(size_t frame_bytes);

// Writes `frame` into out[0, frame_bytes) (zero-padded). InvalidArgument when it does not fit or
// frame_bytes is below kNcclMinFrameBytes.
absl::Status EncodeNcclFrame(const NcclFrame& frame, char* out, size_t frame_bytes);
// InvalidArgument when `bytes` is not a well-formed frame.
absl::StatusOr<NcclFrame> DecodeNcclFrame(std::string_view bytes);

// What an owner's NcclKvTransport publishes as pool_remote_key(): its pool's size (writers check
// destinations against it) and its transport incarnation (a restarted owner gets new connections).
// Magic "TKVN", a version, then both as u64.
struct NcclPoolKey {
  uint64_t pool_bytes = 0;
  uint64_t incarnation = 0;
  bool operator==(const NcclPoolKey&) const = default;
};
std::string EncodeNcclPoolKey(const NcclPoolKey& key);
// InvalidArgument when `bytes` is not a key of this version.
absl::StatusOr<NcclPoolKey> DecodeNcclPoolKey(std::string_view bytes);

// The frames for one Write: `copies`' destinations as runs (already coalesced by the caller), at
// most NcclFrameMaxRuns(frame_bytes) per frame, sequence numbers from `first_sequence` on. Each
// frame's runs pair with the same copies in order (the writer sends the copies' source ranges).
std::vector<NcclFrame> PlanNcclCopyFrames(const std::vector<KvCopy>& copies, size_t frame_bytes,
                                          uint64_t first_sequence);

}  // namespace tandem

#endif  // TANDEM_COMMON_TRANSPORT_CUDA_NCCL_FRAME_H_
