#!/usr/bin/env python3
"""Gloo collective latency back to back and right after a burst of compute, on this machine.

Two CPU processes (one intra-op thread each, as `stratagem run --cpu` gives them on two cores)
all-gather a 256 KiB fp32 tensor per rank (512 KiB gathered: tp2-cpu-gpt-tiny's TP messages)
150 times per round, either back to back (how `stratagem calibrate` sweeps collectives) or each
after ~3 ms of small (64x64x256) matmuls on both ranks (how a tensor-parallel step issues them).
Prints rank 0's median, p90 and mean per round, three rounds of each, alternating.

Needs PyTorch (Debian: apt-get install python3-torch), a reference peer for measurements,
never a dependency of Stratagem. Usage: python3 bench/gloo_after_compute.py
"""
import os
import socket
import sys
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

ELEMENTS = 65536  # 256 KiB of fp32 per rank
ITERATIONS = 150
WARMUP = 10
BURST_MS = 3.0


def burst(a, b, ms):
    t0 = time.perf_counter()
    while (time.perf_counter() - t0) * 1e3 < ms:
        torch.mm(a, b)


def worker(rank, port):
    torch.set_num_threads(1)
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    dist.init_process_group("gloo", rank=rank, world_size=2)
    x = torch.randn(ELEMENTS)
    out = [torch.empty(ELEMENTS), torch.empty(ELEMENTS)]
    a, b = torch.randn(64, 64), torch.randn(64, 256)  # ~20 us a call: bursts end on time
    for mode, ms in [("back to back", 0.0), ("after compute", BURST_MS)] * 3:
        times = []
        for _ in range(ITERATIONS):
            if ms:
                burst(a, b, ms)
            t0 = time.perf_counter()
            dist.all_gather(out, x)
            times.append(time.perf_counter() - t0)
        t = sorted(times[WARMUP:])
        if rank == 0:
            print(f"{mode:14s} median {t[len(t) // 2] * 1e6:6.0f} us  "
                  f"p90 {t[int(len(t) * 0.9)] * 1e6:6.0f} us  mean {sum(t) / len(t) * 1e6:6.0f} us",
                  flush=True)
    dist.destroy_process_group()


def main():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    print(f"# gloo all_gather of {ELEMENTS * 4 * 2 // 1024} KiB over 2 processes, torch {torch.__version__}")
    mp.spawn(worker, args=(port,), nprocs=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
