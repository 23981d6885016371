// Writes tensors as safetensors files: one file, or shards plus model.safetensors.index.json in
// the layout Hugging Face's save_pretrained produces (model-00001-of-00003.safetensors, ...).
#ifndef TANDEM_COMMON_MODEL_SAFETENSORS_WRITER_H_
#define TANDEM_COMMON_MODEL_SAFETENSORS_WRITER_H_

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/types/dtype.h"

namespace tandem {

// One tensor to write. `data` holds numel * DTypeSize(dtype) bytes in dtype's encoding, row-major;
// it is not owned and must outlive the write call.
struct TensorToWrite {
  std::string name;
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;
  std::span<const uint8_t> data;
};

// Encodes f32 values as `dtype` (16-bit formats round to nearest even).
std::vector<uint8_t> EncodeF32(DType dtype, std::span<const float> values);

// Writes one safetensors file. Tensors are stored widest dtype first (then in the given order) and
// the header is padded to a multiple of 8 bytes, so every tensor is aligned for its dtype. The
// file is written to PATH.tmp and renamed, so PATH is never left half-written. InvalidArgument for
// a duplicate name or a data size that does not match shape x dtype.
absl::Status WriteSafetensors(const std::string& path, std::span<const TensorToWrite> tensors,
                              const std::map<std::string, std::string>& metadata = {});

// Shard file name for 0-based `index` of `count`: "model-00001-of-00003.safetensors".
std::string ShardFileName(int index, int count);

// Writes shards[i] to DIR/ShardFileName(i, n) and DIR/model.safetensors.index.json mapping each
// tensor to its shard. Every shard must be non-empty.
absl::Status WriteSafetensorsShards(const std::string& dir,
                                    const std::vector<std::vector<TensorToWrite>>& shards);

// Splits tensors, in order, into shards of at most max_shard_bytes each (a tensor bigger than that
// gets a shard of its own), like save_pretrained(max_shard_size=...).
std::vector<std::vector<TensorToWrite>> ShardBySize(std::span<const TensorToWrite> tensors,
                                                    int64_t max_shard_bytes);

// Splits tensors, in order, into exactly `count` non-empty shards of about equal bytes.
// InvalidArgument when count < 1 or there are fewer tensors than shards.
absl::StatusOr<std::vector<std::vector<TensorToWrite>>> ShardIntoCount(
    std::span<const TensorToWrite> tensors, int count);

}  // namespace tandem

#endif  // TANDEM_COMMON_MODEL_SAFETENSORS_WRITER_H_
