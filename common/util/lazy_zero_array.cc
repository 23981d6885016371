#include "common/util/lazy_zero_array.h"

#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <deque>
#include <mutex>
#include <new>
#include <vector>

namespace tandem::lazy_zero_array_internal {
namespace {

// Released mappings kept for the next Map of the same size, up to this much address space.
constexpr size_t kMaxKeptBytes = size_t{2} << 30;

std::atomic<bool> keep_released{false};

struct KeptMapping {
  void* p;
  size_t mapped;
};

// The mappings released and not yet reused, oldest first. Leaked on purpose: arrays may be
// released by other static destructors.
struct Kept {
  std::mutex mu;
  std::deque<KeptMapping> mappings;
  size_t bytes = 0;
  int64_t reused = 0;
};

Kept& KeptMappings() {
  static Kept* kept = new Kept;
  return *kept;
}

size_t PageSize() { return static_cast<size_t>(sysconf(_SC_PAGESIZE)); }

// Makes a released mapping read as zero again: the pages it touched (resident) are cleared in
// place, which costs a memset; the rest are dropped (MADV_DONTNEED: zero when next touched — this
// also covers a page that was swapped out, which mincore reports as not resident).
bool ZeroAgain(void* p, size_t mapped) {
  const size_t page = PageSize();
  const size_t pages = mapped / page;
  std::vector<unsigned char> resident(pages);
  if (mincore(p, mapped, resident.data()) != 0) return false;
  char* base = static_cast<char*>(p);
  size_t i = 0;
  while (i < pages) {
    size_t j = i;
    const bool in_core = (resident[i] & 1) != 0;
    while (j < pages && ((resident[j] & 1) != 0) == in_core) ++j;
    if (in_core) {
      std::memset(base + i * page, 0, (j - i) * page);
    } else if (madvise(base + i * page, (j - i) * page, MADV_DONTNEED) != 0) {
      return false;
    }
    i = j;
  }
  return true;
}

}  // namespace

void* Map(size_t bytes, size_t* mapped) {
  const size_t page = PageSize();
  *mapped = (bytes + page - 1) / page * page;
  Kept& kept = KeptMappings();
  void* reuse = nullptr;
  {
    std::lock_guard<std::mutex> lock(kept.mu);
    for (auto it = kept.mappings.begin(); it != kept.mappings.end(); ++it) {
      if (it->mapped != *mapped) continue;
      reuse = it->p;
      kept.bytes -= it->mapped;
      kept.mappings.erase(it);
      break;
    }
  }
  if (reuse != nullptr) {
    if (ZeroAgain(reuse, *mapped)) {
      std::lock_guard<std::mutex> lock(kept.mu);
      ++kept.reused;
      return reuse;
    }
    munmap(reuse, *mapped);
  }
  void* p = mmap(nullptr, *mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) throw std::bad_alloc();
  return p;
}

void Release(void* p, size_t mapped) {
  if (!keep_released.load(std::memory_order_relaxed)) {
    munmap(p, mapped);
    return;
  }
  std::vector<KeptMapping> unmap;
  {
    Kept& kept = KeptMappings();
    std::lock_guard<std::mutex> lock(kept.mu);
    if (mapped > kMaxKeptBytes) {
      unmap.push_back({p, mapped});
    } else {
      while (kept.bytes + mapped > kMaxKeptBytes) {
        unmap.push_back(kept.mappings.front());
        kept.bytes -= kept.mappings.front().mapped;
        kept.mappings.pop_front();
      }
      kept.mappings.push_back({p, mapped});
      kept.bytes += mapped;
    }
  }
  for (const KeptMapping& m : unmap) munmap(m.p, m.mapped);
}

int64_t ReusedMappings() {
  Kept& kept = KeptMappings();
  std::lock_guard<std::mutex> lock(kept.mu);
  return kept.reused;
}

}  // namespace tandem::lazy_zero_array_internal

namespace tandem {

void KeepReleasedLazyZeroArrays(bool keep) {
  lazy_zero_array_internal::keep_released.store(keep, std::memory_order_relaxed);
}

}  // namespace tandem
