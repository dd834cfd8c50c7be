"""`python -m gpualloc`: the command line, as the `gpualloc` script runs it."""

import sys

from gpualloc.agent.cli import main

sys.exit(main())
