"""What-if studies of future silicon (issue 18): sweeps of spec constants and workload knobs,
sensitivities, generation comparisons (on the projection, ``emulator.project``) and instrumentation
coverage (on emulated runs and the catalog's analysis).

Modules: ``knobs`` (the ``--vary`` syntax, points, grids), ``points`` (one projected point, the
cache), ``sweep`` (parallel grids, bottleneck crossings), ``sensitivity``, ``compare``, ``plots``,
``coverage`` and ``scenarios``. This package sits above both the emulator and the analysis (the
analysis must not import the emulator), as ``perfonto.job`` does.
"""
