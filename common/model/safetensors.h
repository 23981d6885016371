// Read-only access to the tensors of safetensors files, memory-mapped.
//
// A model directory holds either one `model.safetensors` or shards listed in
// `model.safetensors.index.json` ("weight_map": tensor name -> shard file name). Opening a store
// validates every header up front: dtypes (F32, F16, BF16 only), shape x dtype size == the
// data_offsets span, spans inside the file, no two spans overlapping. Every error names the file
// and, where it applies, the tensor.
//
// Tensor data is not guaranteed to be aligned for its element type (the format packs tensors
// back to back): copy or use unaligned loads.
#ifndef TANDEM_COMMON_MODEL_SAFETENSORS_H_
#define TANDEM_COMMON_MODEL_SAFETENSORS_H_

#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "common/model/tensor.h"
#include "common/util/mapped_file.h"

namespace tandem {

inline constexpr char kSafetensorsFileName[] = "model.safetensors";
inline constexpr char kSafetensorsIndexFileName[] = "model.safetensors.index.json";

// Parses and validates the bytes of one safetensors file as SafetensorsStore does when it opens
// one (header, dtypes, spans); the views point into `bytes`, in the header's order. `path` only
// names the file in error messages.
absl::StatusOr<std::vector<TensorView>> ParseSafetensors(std::span<const uint8_t> bytes,
                                                         const std::string& path);

class SafetensorsStore {
 public:
  // Opens DIR/model.safetensors if it exists, else the shards DIR/model.safetensors.index.json
  // lists. NotFound when the directory has neither.
  static absl::StatusOr<std::shared_ptr<SafetensorsStore>> OpenDir(const std::string& model_dir);
  // Opens one safetensors file.
  static absl::StatusOr<std::shared_ptr<SafetensorsStore>> OpenFile(const std::string& path);

  SafetensorsStore(const SafetensorsStore&) = delete;
  SafetensorsStore& operator=(const SafetensorsStore&) = delete;

  // The tensor's view (valid while this store lives). NotFound names the tensor and the files
  // searched.
  absl::StatusOr<TensorView> Get(std::string_view name) const;
  bool Contains(std::string_view name) const;
  // Path of the file holding `name`; empty when there is no such tensor.
  std::string FileOf(std::string_view name) const;
  // All tensor names, sorted.
  std::vector<std::string> TensorNames() const;
  // The files opened, in the order opened.
  std::vector<std::string> Files() const;
  // "DIR/model.safetensors" or "DIR/model.safetensors.index.json (shards: a, b)", for messages.
  const std::string& description() const { return description_; }

 private:
  struct Entry {
    int file = 0;  // index into files_
    TensorView view;
  };
  SafetensorsStore() = default;
  absl::Status AddFile(const std::string& path);

  std::vector<std::unique_ptr<MappedFile>> files_;
  std::map<std::string, Entry, std::less<>> tensors_;
  std::string description_;
};

}  // namespace tandem

#endif  // TANDEM_COMMON_MODEL_SAFETENSORS_H_
