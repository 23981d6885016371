// A zero-initialized, 64-byte aligned array of floats: weights, scratch and the KV pool of the CPU
// backend. Movable, not copyable; resizing reallocates and forgets the old contents.
#ifndef TANDEM_COMMON_BACKEND_ALIGNED_BUFFER_H_
#define TANDEM_COMMON_BACKEND_ALIGNED_BUFFER_H_

#include <sys/mman.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <span>

namespace tandem {

class AlignedFloats {
 public:
  static constexpr size_t kAlignment = 64;
  static constexpr size_t kHugePage = size_t{2} << 20;

  AlignedFloats() = default;

  // Replaces the contents with `n` zeros; false (and empty) when the memory is not available.
  // Buffers of 4 MiB and more sit on 2 MiB boundaries and ask for transparent huge pages: the
  // weights and the KV pool are streamed end to end every step, and 4 KiB pages would cost a
  // TLB miss every 4 KiB.
  [[nodiscard]] bool Reset(size_t n) {
    data_.reset();
    size_ = 0;
    if (n == 0) return true;
    if (n > SIZE_MAX / sizeof(float) - kHugePage) return false;
    const bool huge = n * sizeof(float) >= 2 * kHugePage;
    const size_t align = huge ? kHugePage : kAlignment;
    const size_t bytes = (n * sizeof(float) + align - 1) / align * align;
    void* p = std::aligned_alloc(align, bytes);
    if (p == nullptr) return false;
#ifdef MADV_HUGEPAGE
    if (huge) madvise(p, bytes, MADV_HUGEPAGE);  // advisory: failure only costs speed
#endif
    std::memset(p, 0, bytes);
    data_.reset(static_cast<float*>(p));
    size_ = n;
    return true;
  }

  // Grows to at least `n` elements (contents are lost when it grows); false when out of memory.
  [[nodiscard]] bool EnsureSize(size_t n) { return n <= size_ || Reset(n); }

  float* data() { return data_.get(); }
  const float* data() const { return data_.get(); }
  size_t size() const { return size_; }
  std::span<float> span() { return {data_.get(), size_}; }
  std::span<const float> span() const { return {data_.get(), size_}; }

 private:
  struct Free {
    void operator()(float* p) const { std::free(p); }
  };
  std::unique_ptr<float, Free> data_;
  size_t size_ = 0;
};

}  // namespace tandem

#endif  // TANDEM_COMMON_BACKEND_ALIGNED_BUFFER_H_
