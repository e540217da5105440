"""The calibrated GPU model's constants that are fits to published kernel and link tables, derived
again from those tables (docs/hardware.md, "The calibrated model's constants").

``python -m sievesim.benchmarks kernel-constants`` prints each fit beside the preset's value:

* ``kernel_ramp_s`` and ``kernel_bandwidth_fraction``: least squares ``t = ramp + bytes / (f x 3.35 TB/s)``
  over DeepGEMM's six M = 64 FP8 GEMMs on H800 SXM5 (deepseek-ai/DeepGEMM README at 327ec92: M, N, K,
  TFLOPS and GB/s per row; a row's time is its FLOPs over its TFLOPS, its bytes that time x its GB/s).
* ``allreduce_bandwidth_bytes_per_s``: the NCCL all-reduce table on 8 x H100 (ByteDance-Seed/
  Triton-distributed issue 57): busbw of the slope from 1 MiB to 16 MiB.
* ``alltoall_latency_s`` and ``alltoall_bandwidth_bytes_per_s``: the line through DeepEP's low-latency
  dispatch (77 us at 98 GB/s) and combine (114 us at 127 GB/s) at EP8 on H800.
* ``scaleout_alltoall_*``: the same line through DeepEP's first, pure-RDMA table (163 us and 318 us at
  46 GB/s).
* ``forwarded_alltoall_bandwidth_bytes_per_s`` and ``scaleout_forwarded_bandwidth_bytes_per_s``: the
  means of DeepEP's normal-kernel table on H800 (dispatch and combine): intranode EP8 153 and 158 GB/s
  over NVLink; internode EP16/32/64 43/58/51 GB/s (dispatch) and 43/57/50 GB/s (combine) over RDMA.
"""
from __future__ import annotations

import argparse

import numpy as np

#: DeepGEMM README (327ec92), normal GEMMs, M = 64: (M, N, K, TFLOPS, GB/s).
DEEPGEMM_M64 = ((64, 2112, 7168, 206, 1688), (64, 24576, 1536, 289, 2455), (64, 32768, 512, 219, 2143),
                (64, 7168, 16384, 336, 2668), (64, 4096, 7168, 287, 2320), (64, 7168, 2048, 295, 2470))
#: H800 SXM5's HBM3 bandwidth, bytes/s (the H100 SXM's).
H800_HBM = 3.35e12
#: NCCL all-reduce on 8 x H100 (bytes, microseconds) at 1 MiB and 16 MiB.
NCCL_8XH100 = ((1 << 20, 32.42), (16 << 20, 135.68))
#: DeepEP low-latency kernels at EP8 on H800: (latency us, GB/s) of dispatch and combine.
DEEPEP_LL = ((77.0, 98.0), (114.0, 127.0))
DEEPEP_LL_RDMA = ((163.0, 46.0), (318.0, 46.0))
#: DeepEP normal kernels on H800 (GB/s): intranode EP8 over NVLink, internode EP16/32/64 over RDMA,
#: each (dispatch, combine).
DEEPEP_NORMAL_NVL = ((153.0, 158.0),)
DEEPEP_NORMAL_RDMA = ((43.0, 43.0), (58.0, 57.0), (51.0, 50.0))


def deepgemm_fit() -> tuple[float, float]:
    """(ramp [s], bandwidth fraction of 3.35 TB/s) of the M = 64 rows."""
    t = np.array([2.0 * m * n * k / (tf * 1e12) for m, n, k, tf, _ in DEEPGEMM_M64])
    nbytes = np.array([ti * gb * 1e9 for ti, (*_, gb) in zip(t, DEEPGEMM_M64)])
    (ramp, per_byte), *_ = np.linalg.lstsq(np.vstack([np.ones_like(nbytes), nbytes]).T, t, rcond=None)
    return float(ramp), float(1.0 / per_byte / H800_HBM)


def allreduce_busbw(gpus: int = 8) -> float:
    """Bus bandwidth [bytes/s] of the 1 MiB -> 16 MiB slope (nccl-tests' 2 (G-1)/G convention)."""
    (b0, t0), (b1, t1) = NCCL_8XH100
    return (b1 - b0) / ((t1 - t0) * 1e-6) * 2.0 * (gpus - 1) / gpus


def line(points: tuple[tuple[float, float], ...]) -> tuple[float, float]:
    """(latency [s], bandwidth [bytes/s]) of the line through two (us, GB/s) measurements."""
    (ta, ga), (tb, gb) = points
    ba, bb = ta * 1e-6 * ga * 1e9, tb * 1e-6 * gb * 1e9
    bw = (bb - ba) / ((tb - ta) * 1e-6)
    return max(ta * 1e-6 - ba / bw, 0.0), bw


def fits() -> dict[str, float]:
    """Every fitted constant, by its hardware field."""
    ramp, frac = deepgemm_fit()
    ll_lat, ll_bw = line(DEEPEP_LL)
    rdma_lat, rdma_bw = line(DEEPEP_LL_RDMA)
    return {"kernel_ramp_s": ramp, "kernel_bandwidth_fraction": frac,
            "allreduce_bandwidth_bytes_per_s": allreduce_busbw(), "alltoall_latency_s": ll_lat,
            "alltoall_bandwidth_bytes_per_s": ll_bw, "scaleout_alltoall_latency_s": rdma_lat,
            "scaleout_alltoall_bandwidth_bytes_per_s": rdma_bw,
            "forwarded_alltoall_bandwidth_bytes_per_s": float(np.mean(DEEPEP_NORMAL_NVL)) * 1e9,
            "scaleout_forwarded_bandwidth_bytes_per_s": float(np.mean(DEEPEP_NORMAL_RDMA)) * 1e9}


def main(argv: list[str] | None = None) -> int:
    argparse.ArgumentParser(prog="python -m sievesim.benchmarks kernel-constants",
                            description=__doc__.split("\n")[0]).parse_args(argv)
    from ..hardware import get_hardware
    h100 = get_hardware("h100")
    for name, value in fits().items():
        section = h100.gpu if hasattr(h100.gpu, name) else h100.interconnect
        print(f"{name:42s} fit {value:.4g}   h100 preset {getattr(section, name):.4g}")
    return 0
