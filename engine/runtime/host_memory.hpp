#pragma once
// Host memory of a CPU worker process. glibc serves an allocation above its mmap threshold
// (128 KiB at start, rising with the blocks freed, at most 32 MiB) with fresh pages that the
// kernel zeroes on first touch, unmaps it when freed, and returns the heap's top to the system
// beyond 128 KiB free. A training step allocates and frees the same activations and gradients
// every micro-batch, so on a CPU it paid page faults for each of them: on the 2-vCPU
// development VM a GPT block's backward at micro-batch 2 took 24 ms with a 24 % spread between
// repetitions, 11.7 ms and 1.5 % with freed memory kept (`stratagem validate
// scenarios/validate-cpu-1f1b.json --num_processes 2 --cpu`, "units timed around the runs").
// Like PyTorch's CUDA caching allocator on GPUs, keep freed memory in the process for reuse.
namespace stratagem::runtime {

/// Serves allocations up to glibc's largest mmap threshold (32 MiB) from the heap and never
/// trims it, so freed blocks are reused without page faults. Call once, early, in a CPU
/// worker process; the process's peak resident memory is unchanged, it is kept until exit.
/// Does nothing where the C library is not glibc.
void keep_freed_host_memory();

}  // namespace stratagem::runtime
