"""The sweep family: grids of points through any executor, and what they write and draw.

* :mod:`.grid`: the settings of a point (decode steps, ``STEP``; serving runs, ``SERVE``), grid
  files, checks and point ids;
* :mod:`.run`: :func:`~sievesim.sweeps.run.run_grid` and the decode point functions;
* :mod:`.serve_points`: serving points and the resumable max-rate search;
* :mod:`.results`: the result files (JSON lines, CSV) and their readers;
* :mod:`.provenance`: content digests of the input files a point reads;
* :mod:`.workers`: process pools whose workers die with their parent;
* :mod:`.plotting`: plots of any sweep output (``sievesim plot``).

The modules were first at the package's top; ``sievesim.sweep``, ``sievesim.serve_sweep``,
``sievesim.grid``, ``sievesim.results``, ``sievesim.provenance``, ``sievesim.workers`` and
``sievesim.plotting`` still import as these same modules.
"""
