"""Measurement scripts the docs cite, runnable from the installed package:

    python -m sievesim.benchmarks                      # lists them
    python -m sievesim.benchmarks system-estimates [--batches 1,16,64,256]
    python -m sievesim.benchmarks system-readings [--batches ...] [--steps N] [--warmup W]

Each module of this package with a ``main(argv) -> int`` is one script (its name with ``-`` for
``_``). They print the tables that docs/system.md shows. (The asv-style timing benchmarks stay in
the repository's ``benchmarks/`` folder: they time the simulator, they do not measure the system.)
"""
