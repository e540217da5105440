"""Kept for old command lines: the script lives in the package, `python -m sievesim.benchmarks system-fidelity`."""
import sys

from sievesim.benchmarks.system_fidelity import main

if __name__ == "__main__":
    sys.exit(main())
