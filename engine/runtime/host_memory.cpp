#include "engine/runtime/host_memory.hpp"

#include <cstdlib>  // defines __GLIBC__ on glibc

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace stratagem::runtime {

void keep_freed_host_memory() {
#if defined(__GLIBC__)
  // 32 MiB is glibc's DEFAULT_MMAP_THRESHOLD_MAX on 64-bit: mallopt refuses more. Setting
  // either value also turns off glibc's dynamic threshold, which would otherwise move it.
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
  mallopt(M_TOP_PAD, 16 << 20);
#endif
}

}  // namespace stratagem::runtime
