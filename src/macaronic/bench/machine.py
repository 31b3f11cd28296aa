"""Describe the machine a benchmark ran on, including a measured memory bandwidth."""

from __future__ import annotations

import os
import platform
import time

import numpy as np


def cpu_model() -> str:
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def cpu_flags() -> list[str]:
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("flags"):
                flags = set(line.split(":", 1)[1].split())
                return sorted(f for f in flags if f.startswith(("avx512", "amx", "avx2")))
    except OSError:
        pass
    return []


def mem_total_gb() -> float:
    try:
        for line in open("/proc/meminfo"):
            if line.startswith("MemTotal"):
                return round(int(line.split()[1]) / 2**20, 1)
    except OSError:
        pass
    return float("nan")


def memory_bandwidth_gbs(mb: int = 512, reps: int = 5) -> float:
    """Read+write bandwidth of a large array copy (numpy, single thread), median of reps."""
    a = np.ones(mb * 2**20 // 8)
    b = np.empty_like(a)
    times = []
    for _ in range(reps):
        t = time.perf_counter()
        np.copyto(b, a)
        times.append(time.perf_counter() - t)
    return round(2 * a.nbytes / float(np.median(times)) / 1e9, 1)


def describe() -> dict:
    import torch

    return {
        "cpu": cpu_model(),
        "cores": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "simd": cpu_flags(),
        "memory_gb": mem_total_gb(),
        "memory_bandwidth_gbs": memory_bandwidth_gbs(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "load": round(os.getloadavg()[0], 1),  # 1-minute load average: how shared the machine was
    }
