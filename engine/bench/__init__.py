"""Benchmarks: measurements that print figures and write them to ``docs/benchmarks/``.

A benchmark is not a test: it asserts nothing about speed or quality, it
measures and reports.  ``knowledge bench search`` is the entry point;
``python -m engine.bench.embedding`` measures the embedding model's
throughput, old code against new; ``python -m engine.bench.gate_shapes`` fits and
reports the embedding Decision model's calibration on two page shapes,
``python -m engine.bench.gate_features`` measures the features tried beside it, and
``python -m engine.bench.disk_rounds`` what one round of the disk (an fsync, a COMMIT)
costs where a store lives.

The command line loads a benchmark only when its ``knowledge bench`` command
runs; the defaults its help shows (data set, report paths, sizes) live in
``defaults``, which imports nothing else.
"""
