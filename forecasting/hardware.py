"""What each GPU type of the contract's list offers a training job: peak rates by precision, the
memory a framework can use, and memory bandwidth. Datasheet figures (dense, no sparsity), except
where a line says it was measured."""

from __future__ import annotations

from gpualloc.schemas.features import GPU_TYPES

GIB = 1024**3

# TFLOPS a GPU, dense: (16-bit tensor, fp8 tensor, tf32 tensor, fp32 without tensor cores). A run in
# fp32 with no TF32 (PyTorch's default for matrix multiplies) runs at the last rate.
PEAK_TFLOPS: dict[str, tuple[float, float, float, float]] = {
    "v100-32gb": (125, 125, 15.7, 15.7),
    "a10-24gb": (125, 125, 62.5, 31.2),
    "l40s-48gb": (362, 733, 183, 91.6),
    "a100-40gb": (312, 312, 156, 19.5),
    "a100-80gb": (312, 312, 156, 19.5),
    "h100-80gb": (989, 1979, 494, 67),
    "h200-141gb": (989, 1979, 494, 67),
    "b200-192gb": (2250, 4500, 1100, 80),
    "mi300x-192gb": (1307, 2615, 654, 163.4),
}

# GiB a framework sees (torch.cuda.mem_get_info's total): the H200's measured on the runs in
# benchmarks/real (139.8 of the 141 GB in its name); the others as their drivers report them
USABLE_GIB: dict[str, float] = {
    "v100-32gb": 31.7,
    "a10-24gb": 22.1,
    "l40s-48gb": 44.4,
    "a100-40gb": 39.4,
    "a100-80gb": 79.1,
    "h100-80gb": 79.1,
    "h200-141gb": 139.8,
    "b200-192gb": 178.4,
    "mi300x-192gb": 192.0,
}

HBM_TB_S: dict[str, float] = {  # memory bandwidth, TB/s
    "v100-32gb": 0.9,
    "a10-24gb": 0.6,
    "l40s-48gb": 0.864,
    "a100-40gb": 1.555,
    "a100-80gb": 2.039,
    "h100-80gb": 3.35,
    "h200-141gb": 4.8,
    "b200-192gb": 8.0,
    "mi300x-192gb": 5.3,
}

assert set(PEAK_TFLOPS) == set(USABLE_GIB) == set(HBM_TB_S) == set(GPU_TYPES)


def peak_flops(gpu_type: str, precision: str) -> float:
    """FLOP/s of the matrix multiplies a run in `precision` makes on `gpu_type`."""
    half, fp8, tf32, fp32 = PEAK_TFLOPS[gpu_type]
    rate = {"fp8": fp8, "tf32": tf32, "fp32": fp32}.get(precision, half)
    return 1e12 * rate
