"""The command line (`gpualloc`), benchmark runner and plan charts around the planning core."""
