#include "common/util/lazy_zero_array.h"

#include <sys/mman.h>
#include <unistd.h>

#include <new>

namespace tandem::lazy_zero_array_internal {

void* Map(size_t bytes, size_t* mapped) {
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  *mapped = (bytes + page - 1) / page * page;
  void* p = mmap(nullptr, *mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) throw std::bad_alloc();
  return p;
}

void Release(void* p, size_t mapped) { munmap(p, mapped); }

}  // namespace tandem::lazy_zero_array_internal
