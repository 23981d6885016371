// A read-only memory-mapped file (model weights are mapped, not read).
#ifndef TANDEM_COMMON_UTIL_MAPPED_FILE_H_
#define TANDEM_COMMON_UTIL_MAPPED_FILE_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace tandem {

class MappedFile {
 public:
  static absl::StatusOr<std::unique_ptr<MappedFile>> Open(const std::string& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& path() const { return path_; }

 private:
  MappedFile(std::string path, const uint8_t* data, size_t size)
      : path_(std::move(path)), data_(data), size_(size) {}
  std::string path_;
  const uint8_t* data_;
  size_t size_;
};

// Reads a whole (small) file into a string; NotFound names the path.
absl::StatusOr<std::string> ReadFileToString(const std::string& path);

}  // namespace tandem

#endif  // TANDEM_COMMON_UTIL_MAPPED_FILE_H_
