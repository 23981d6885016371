// A fixed-size, zero-initialized array for large tables (the KV block manager's records, token
// copies, name index and free queue), mapped straight from the kernel: its pages are zero without
// a memset, and each is only faulted in when first used. tandem-sim builds 125 pools of 83,000
// blocks (1.3 GB); with std::vector each was zeroed up front, and a 60 s trace on them took 15 %
// longer (tools/sim/README.md, "Scale"). Transparent huge pages were tried too and left off:
// on this machine's VM they made the runs that fill the pools about 20 % slower.
//
// With KeepReleasedLazyZeroArrays(true) a released array's mapping is kept (up to 2 GiB of them)
// for the next array of the same size, zeroed where it was touched: tandem-plan builds and drops a
// cluster of pools for every run it simulates, and on a VM with paravirtual paging, as this
// machine's, the first touch of each page costs about 14 us (7 us even when populated up front), a
// memset of a touched one well under 1 us (tools/sim/README.md, "Scale"). Kept mappings stay
// resident until reused or the process ends, so it is off by default: a process that builds its
// pools once (a node, one tandem-sim run) gives their memory back when it frees them.
//
// T must be trivially copyable with all-zero bytes as its initial value. Movable, not copyable.
#ifndef TANDEM_COMMON_UTIL_LAZY_ZERO_ARRAY_H_
#define TANDEM_COMMON_UTIL_LAZY_ZERO_ARRAY_H_

#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <utility>

namespace tandem {

// Whether released arrays' mappings are kept for reuse (above). Off by default.
void KeepReleasedLazyZeroArrays(bool keep);

namespace lazy_zero_array_internal {
// `bytes` (> 0) of zeroed memory (std::bad_alloc when the system has none); `*mapped` is what to
// pass to Release.
void* Map(size_t bytes, size_t* mapped);
// Unmaps the mapping, or keeps it for a later Map of the same size (KeepReleasedLazyZeroArrays).
void Release(void* p, size_t mapped);
// How many Maps so far were served by a kept mapping (for tests).
int64_t ReusedMappings();
}  // namespace lazy_zero_array_internal

template <typename T>
class LazyZeroArray {
  static_assert(std::is_trivially_copyable_v<T>);

 public:
  LazyZeroArray() = default;
  // `n` zero elements; throws std::bad_alloc when the memory cannot be mapped (as std::vector).
  explicit LazyZeroArray(size_t n) : size_(n) {
    if (n == 0) return;
    data_ = static_cast<T*>(lazy_zero_array_internal::Map(n * sizeof(T), &mapped_));
  }
  LazyZeroArray(LazyZeroArray&& other) noexcept { Swap(other); }
  LazyZeroArray& operator=(LazyZeroArray&& other) noexcept {
    LazyZeroArray moved(std::move(other));
    Swap(moved);
    return *this;
  }
  LazyZeroArray(const LazyZeroArray&) = delete;
  LazyZeroArray& operator=(const LazyZeroArray&) = delete;
  ~LazyZeroArray() {
    if (data_ != nullptr) lazy_zero_array_internal::Release(data_, mapped_);
  }

  size_t size() const { return size_; }
  T* data() { return data_; }
  const T* data() const { return data_; }
  T& operator[](size_t i) { return data_[i]; }
  const T& operator[](size_t i) const { return data_[i]; }
  T* begin() { return data_; }
  T* end() { return data_ + size_; }
  const T* begin() const { return data_; }
  const T* end() const { return data_ + size_; }

 private:
  void Swap(LazyZeroArray& other) {
    std::swap(data_, other.data_);
    std::swap(size_, other.size_);
    std::swap(mapped_, other.mapped_);
  }

  T* data_ = nullptr;
  size_t size_ = 0;
  size_t mapped_ = 0;
};

}  // namespace tandem

#endif  // TANDEM_COMMON_UTIL_LAZY_ZERO_ARRAY_H_
