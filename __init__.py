"""gpualloc: a constraint-aware GPU allocator (this folder installs as the `gpualloc` package).

Rooms: `gpualloc.solvers` (the pure core: policies, planner, legality, metrics, simulation),
`gpualloc.agent` (the shell: pool agent, node agent, CLI, reports), `gpualloc.forecasting`,
`gpualloc.schemas` (the contracts and the configuration), `gpualloc.benchmarks` (bundled data).
"""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("gpualloc")
except PackageNotFoundError:  # a checkout imported without installing
    __version__ = "0+unknown"
