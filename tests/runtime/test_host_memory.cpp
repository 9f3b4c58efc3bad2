// keep_freed_host_memory: a block of a few MiB comes from the heap, not a fresh mapping, so
// freeing and allocating it again costs no page faults.
#include <gtest/gtest.h>

#include <cstdlib>

#include "engine/runtime/host_memory.hpp"

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace stratagem::test {
namespace {

TEST(HostMemory, BlocksOfAFewMebibytesComeFromTheHeap) {
#if defined(__GLIBC__)
  runtime::keep_freed_host_memory();
  const auto mapped_before = mallinfo2().hblks;
  void* block = std::malloc(8 << 20);  // above glibc's default 128 KiB mmap threshold
  ASSERT_NE(block, nullptr);
  EXPECT_EQ(mallinfo2().hblks, mapped_before);
  std::free(block);
#else
  GTEST_SKIP() << "not glibc";
#endif
}

}  // namespace
}  // namespace stratagem::test
