#include "engine/runtime/threads.hpp"

#include <dlfcn.h>

#include <ATen/Parallel.h>

namespace stratagem::runtime {

void set_cpu_threads(int n) {
  at::set_num_threads(n);
  // Looked up, not linked: the BLAS is whatever LibTorch was built against.
  using SetFn = void (*)(int);
  if (auto set = reinterpret_cast<SetFn>(::dlsym(RTLD_DEFAULT, "openblas_set_num_threads"))) {
    set(n);
  }
}

}  // namespace stratagem::runtime
