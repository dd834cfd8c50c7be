"""The links a multi-GPU job's collectives cross, and how long a collective takes on them.

Within a node of up to `NODE_GPUS` GPUs a job's GPUs talk over NVLink where the type has it (PCIe
otherwise); a job spread over more GPUs crosses nodes, and its rings run at the rate of the
network, one InfiniBand adapter a GPU. Rates are one direction a GPU, from the datasheets:
NVLink 2/3/4/5 (V100 300 GB/s, A100 600, H100 and H200 900, B200 1,800 GB/s both directions),
AMD's Infinity Fabric on the MI300X (7 links of 64 GB/s a direction), PCIe Gen3/4/5 x16 (16, 32,
64 GB/s), InfiniBand EDR/HDR/NDR (100, 200, 400 Gb/s) as each generation's reference systems pair
them (DGX-1, DGX A100, DGX H100/H200/B200). A ring collective reaches about `ACHIEVED_LINK` of
a link's rate (NCCL's bus bandwidth on large messages): an assumption, not a measurement of ours.
"""

from __future__ import annotations

from gpualloc.schemas.features import Interconnect

NODE_GPUS = 8  # GPUs a node's fast links join
ACHIEVED_LINK = 0.8

# GB/s a GPU, one direction: (NVLink or Infinity Fabric; None where the type has none, PCIe x16, InfiniBand)
LINK_GB_S: dict[str, tuple[float | None, float, float]] = {
    "v100-32gb": (150, 16, 12.5),
    "a10-24gb": (None, 32, 25),
    "l40s-48gb": (None, 32, 25),
    "a100-40gb": (300, 32, 25),
    "a100-80gb": (300, 32, 25),
    "h100-80gb": (450, 64, 50),
    "h200-141gb": (450, 64, 50),
    "b200-192gb": (900, 64, 50),
    "mi300x-192gb": (448, 64, 50),
}


def link_bytes_s(gpu_type: str, gpus: int, interconnect: Interconnect | None = None) -> float:
    """Bytes a second a ring collective over `gpus` GPUs moves a GPU: the slowest link it crosses
    (the node's, or the network's past one node; a pool on `infiniband` has one GPU a node; None:
    NVLink where the type has it)."""
    nvlink, pcie, network = LINK_GB_S[gpu_type]
    if interconnect == "infiniband" or gpus > NODE_GPUS:
        rate = network
    elif interconnect == "pcie" or nvlink is None:
        rate = pcie
    else:
        rate = nvlink
    return rate * 1e9 * ACHIEVED_LINK


def host_bytes_s(gpu_type: str) -> float:
    """Bytes a second between a GPU and host memory: its PCIe link."""
    return LINK_GB_S[gpu_type][1] * 1e9 * ACHIEVED_LINK


def all_reduce_s(size_bytes: float, gpus: int, rate: float) -> float:
    """A ring all-reduce of a tensor of `size_bytes`: each GPU sends and receives 2(n-1)/n of it."""
    return 0.0 if gpus <= 1 else 2 * (gpus - 1) / gpus * size_bytes / rate


def gather_s(size_bytes: float, gpus: int, rate: float) -> float:
    """A ring all-gather or reduce-scatter of a tensor of `size_bytes` (the whole, not a shard)."""
    return 0.0 if gpus <= 1 else (gpus - 1) / gpus * size_bytes / rate
