#!/usr/bin/env python3
"""Checks a tile/wave-quantization GEMM model against public cuBLAS figures (bench/README.md,
2026-12-02): median |error| of predicted TFLOP/s, against the presets' present curve
(0.8 * d / (d + 128) of the smallest dimension plus the GEMM's HBM traffic, + 5 us launch).

Data (cuBLAS columns of triton's matmul tutorial runs):
  H100 SXM, M = 2048, N = K: triton-lang/triton#2339
  A100, fp16 square: triton-lang/triton#3551
Model: tiles of 256x128 (and 128x128 at the intensity ratio), one per SM per wave,
a per-tile K prologue k0, MAMF's best-shape fraction as the ceiling (ml-engineering: A100
0.869, H100 0.803), max with the HBM time, + t0 per kernel.
Run: python3 bench/gemm_tile_model_check.py
"""
import math
import statistics

A100 = [(1024, 104.9), (1152, 129.8), (1280, 157.5), (1408, 151.4), (1536, 176.9), (1664, 180.0),
        (1792, 172.9), (1920, 209.5), (2048, 233.0), (2176, 221.1), (2304, 246.3), (2432, 219.5),
        (2560, 244.5), (2688, 213.1), (2816, 230.8), (2944, 247.9), (3072, 229.2)]
H100 = [((2048, 512, 512), 102.6), ((2048, 1024, 1024), 243.1), ((2048, 2048, 2048), 515.2),
        ((2048, 4096, 4096), 613.7), ((2048, 8192, 8192), 721.6)]
GPUS = {"A100": (312e12, 108, 0.869, 2039e9 * 0.86), "H100": (989.4e12, 132, 0.803, 3350e9 * 0.74)}


def tiles_model(m, n, k, gpu, k0, t0, tiles=((256, 128), (128, 128))):
    peak, sms, mx, hbm = GPUS[gpu]
    big = tiles[0][0] * tiles[0][1] / (tiles[0][0] + tiles[0][1])
    best = math.inf
    for tm, tn in tiles:
        for a, b in ((tm, tn), (tn, tm)):
            waves = math.ceil(math.ceil(m / a) * math.ceil(n / b) / sms)
            rate = peak * mx * min(1.0, (a * b / (a + b)) / big) / sms
            best = min(best, waves * 2 * a * b * (k + k0) / rate)
    return max(best, 2 * (m * k + k * n + m * n) / hbm) + t0


def curve_model(m, n, k, gpu, t0=5e-6):
    peak, _, _, hbm = GPUS[gpu]
    d = min(m, n, k)
    return 2 * m * n * k / (peak * 0.8 * d / (d + 128)) + 2 * (m * k + k * n + m * n) / hbm + t0


def errors(model, gpu, **kw):
    data = [((d, d, d), tf) for d, tf in A100] if gpu == "A100" else H100
    return [100 * (2 * m * n * k / model(m, n, k, gpu, **kw) / 1e12 / tf - 1) for (m, n, k), tf in data]


for gpu in ("A100", "H100"):
    e = errors(curve_model, gpu)
    print(f"{gpu} present curve: median |err| {statistics.median(map(abs, e)):.1f} %, each {[round(x) for x in e]}")
    for k0 in (0, 128, 256):
        for t0 in (0, 5e-6):
            e = errors(tiles_model, gpu, k0=k0, t0=t0)
            print(f"{gpu} tiles k0={k0:3d} t0={t0 * 1e6:.0f}us: median |err| "
                  f"{statistics.median(map(abs, e)):.1f} %, each {[round(x) for x in e]}")
