#!/usr/bin/env python3
"""Compute alone against compute on every process at once, on this machine.

Times a GPT block like the CPU validation scenarios' (hidden 256, 4 heads, ffn 1024, sequence
128; one intra-op thread and one OpenBLAS thread per process, as `stratagem run --cpu` gives
each worker on two cores) forward and backward, first in one process while the others sleep,
then in N processes at once. Prints the medians and the slow-down of running together (time
together / time alone): what `stratagem calibrate` measures as `overlap.compute_contention`.

Set the threads as the workers do: without OPENBLAS_NUM_THREADS=1 a lone process's matmuls
use every core and the figure measures OpenBLAS's threads, not the host (2.6x instead of 1.1x
on the 2-vCPU development VM).

Needs PyTorch (Debian: apt-get install python3-torch), a reference peer for measurements,
never a dependency of Stratagem. Usage: python3 bench/cpu_contention.py [processes] [seconds]
"""
import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # before torch loads OpenBLAS
os.environ.setdefault("OMP_NUM_THREADS", "1")

import multiprocessing as mp  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402


def block_times(batch, seconds, start, out):
    import torch

    torch.set_num_threads(1)
    torch.manual_seed(0)
    block = torch.nn.TransformerEncoderLayer(256, 4, 1024, dropout=0.0, batch_first=True,
                                             norm_first=True)
    x = torch.randn(batch, 128, 256, requires_grad=True)
    for _ in range(3):
        block(x).sum().backward()
    start.wait()
    forward, backward = [], []
    end = time.time() + seconds
    while time.time() < end:
        t0 = time.perf_counter()
        y = block(x)
        t1 = time.perf_counter()
        y.sum().backward()
        t2 = time.perf_counter()
        forward.append(t1 - t0)
        backward.append(t2 - t1)
    forward.sort()
    backward.sort()
    out.put((forward[len(forward) // 2], backward[len(backward) // 2]))


def run(processes, batch, seconds):
    start = mp.Barrier(processes)
    out = mp.Queue()
    ps = [mp.Process(target=block_times, args=(batch, seconds, start, out))
          for _ in range(processes)]
    for p in ps:
        p.start()
    results = [out.get() for _ in ps]
    for p in ps:
        p.join()
    return max(r[0] for r in results), max(r[1] for r in results)


def main():
    processes = int(sys.argv[1]) if len(sys.argv) > 1 else 2
    seconds = float(sys.argv[2]) if len(sys.argv) > 2 else 5.0
    print(f"GPT block h256 ffn1024 s128, 1 thread per process; {processes} processes together")
    print("batch  alone fwd / bwd       together fwd / bwd (slowest)   slow-down fwd / bwd")
    for batch in (2, 4):
        af, ab = run(1, batch, seconds)
        tf, tb = run(processes, batch, seconds)
        print(f"{batch:5d}  {1e3 * af:6.2f} / {1e3 * ab:6.2f} ms    "
              f"{1e3 * tf:6.2f} / {1e3 * tb:6.2f} ms               "
              f"{tf / af:4.2f}x / {tb / ab:4.2f}x")


if __name__ == "__main__":
    main()
