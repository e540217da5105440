"""Kept for old command lines: the script lives in the package, `python -m sievesim.benchmarks system-estimates`."""
import sys

from sievesim.benchmarks.system_estimates import main

if __name__ == "__main__":
    sys.exit(main())
