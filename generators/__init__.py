"""The workshop's data makers: seeded scenarios and traces, the benchmark corpus and its optima,
the synthetic and catalogue ground truth, and the converters of public traces (openb, Pollux).
Used by the benches, the tests and `gpualloc trace | corpus | generate`; the agents, the planner
and the forecasters never import them (import-linter)."""
