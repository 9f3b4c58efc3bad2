#pragma once
// CPU threads of a worker process. LibTorch's at::set_num_threads does not reach the OpenBLAS
// that Debian's LibTorch calls for fp32 matmul: OpenBLAS keeps one thread per core, so N
// worker processes on N cores would run N² BLAS threads that spin (sched_yield) against each
// other. set_cpu_threads sets both.
namespace stratagem::runtime {

/// at::set_num_threads(n) and, when the process has OpenBLAS loaded, openblas_set_num_threads.
void set_cpu_threads(int n);

}  // namespace stratagem::runtime
