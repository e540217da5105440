"""Kept for old command lines: the script lives in the package, `python -m sievesim.benchmarks system-readings`."""
import sys

from sievesim.benchmarks.system_readings import main

if __name__ == "__main__":
    sys.exit(main())
