#!/usr/bin/env python3
"""Compute alone against compute on every process at once, on this machine.

Times a GPT block like the CPU validation scenarios' (hidden 256, 4 heads, ffn 1024, sequence
128; one intra-op thread per process, as `stratagem run --cpu` gives each worker) forward and
backward, first in one process while the others sleep, then in N processes at once. Prints the
medians and the slow-down of running together (time together / time alone).

Why: `stratagem calibrate --scenario` and `validate --fresh-units` time the model's units with
every process computing at once. A pipeline's ranks take turns (one computes while the other
waits for its activations), so where the slow-down is large the measured units over-state the
pipeline's compute and the simulator over-predicts it.

Needs PyTorch (Debian: apt-get install python3-torch), a reference peer for measurements,
never a dependency of Stratagem. Usage: python3 bench/cpu_contention.py [processes] [seconds]
"""
import multiprocessing as mp
import sys
import time


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
