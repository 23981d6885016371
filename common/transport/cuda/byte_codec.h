// Little-endian byte writing and reading for the small wire formats of the device-pool transports
// (the pool descriptor, the staged protocol's messages, NCCL header frames). The reader never reads
// past its input: a short or malformed input turns into a failed read that the caller reports.
#ifndef TANDEM_COMMON_TRANSPORT_CUDA_BYTE_CODEC_H_
#define TANDEM_COMMON_TRANSPORT_CUDA_BYTE_CODEC_H_

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

namespace tandem::transport_wire {

class ByteWriter {
 public:
  explicit ByteWriter(std::string* out) : out_(out) {}

  void U8(uint8_t v) { out_->push_back(static_cast<char>(v)); }
  void U16(uint16_t v) { Int(v, 2); }
  void U32(uint32_t v) { Int(v, 4); }
  void U64(uint64_t v) { Int(v, 8); }
  void I64(int64_t v) { Int(static_cast<uint64_t>(v), 8); }
  // A u32 length, then the bytes.
  void Bytes(std::string_view s) {
    U32(static_cast<uint32_t>(s.size()));
    out_->append(s.data(), s.size());
  }

 private:
  void Int(uint64_t v, int n) {
    for (int i = 0; i < n; ++i) out_->push_back(static_cast<char>((v >> (8 * i)) & 0xff));
  }
  std::string* out_;
};

class ByteReader {
 public:
  explicit ByteReader(std::string_view in) : in_(in) {}

  // Each returns false (and leaves the reader failed) when the input is too short.
  bool U8(uint8_t* v) {
    uint64_t x = 0;
    if (!Int(&x, 1)) return false;
    *v = static_cast<uint8_t>(x);
    return true;
  }
  bool U16(uint16_t* v) {
    uint64_t x = 0;
    if (!Int(&x, 2)) return false;
    *v = static_cast<uint16_t>(x);
    return true;
  }
  bool U32(uint32_t* v) {
    uint64_t x = 0;
    if (!Int(&x, 4)) return false;
    *v = static_cast<uint32_t>(x);
    return true;
  }
  bool U64(uint64_t* v) { return Int(v, 8); }
  bool I64(int64_t* v) {
    uint64_t x = 0;
    if (!Int(&x, 8)) return false;
    *v = static_cast<int64_t>(x);
    return true;
  }
  // A u32 length, then that many bytes; fails when the length exceeds `max_bytes` or the input.
  bool Bytes(std::string* s, size_t max_bytes) {
    uint32_t n = 0;
    if (!U32(&n)) return false;
    if (n > max_bytes || n > remaining()) return Fail();
    s->assign(in_.data() + pos_, n);
    pos_ += n;
    return true;
  }

  size_t remaining() const { return failed_ ? 0 : in_.size() - pos_; }
  bool failed() const { return failed_; }

 private:
  bool Fail() {
    failed_ = true;
    return false;
  }
  bool Int(uint64_t* v, int n) {
    if (failed_ || in_.size() - pos_ < static_cast<size_t>(n)) return Fail();
    uint64_t x = 0;
    for (int i = 0; i < n; ++i) {
      x |= uint64_t{static_cast<unsigned char>(in_[pos_ + i])} << (8 * i);
    }
    pos_ += n;
    *v = x;
    return true;
  }

  std::string_view in_;
  size_t pos_ = 0;
  bool failed_ = false;
};

}  // namespace tandem::transport_wire

#endif  // TANDEM_COMMON_TRANSPORT_CUDA_BYTE_CODEC_H_
