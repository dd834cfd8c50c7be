"""gpualloc: a constraint-aware GPU allocator (this folder installs as the `gpualloc` package).

Rooms that run: `gpualloc.solvers` (the pure core: policies, planner, legality, metrics,
simulation), `gpualloc.forecasting`, `gpualloc.schemas` (the contracts and the configuration),
`gpualloc.bus` (Kafka topics, records and clients), `gpualloc.client` (for upstream platforms),
`gpualloc.agent` (the shell: pool agent, node agent, CLI, reports). The workshop, which nothing
that runs imports: `gpualloc.benchmarks` (the benches and their bundled data) and
`gpualloc.generators` (scenarios, traces, corpus, ground truth).
"""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("gpualloc")
except PackageNotFoundError:  # a checkout imported without installing
    __version__ = "0+unknown"
