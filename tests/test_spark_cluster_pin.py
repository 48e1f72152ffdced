"""``StandaloneCluster(pin=True)`` binds each worker to CPUs of its own (the benchmark's one-core workers
use one CPU each); without ``pin`` a worker may use any CPU."""

import os

import pytest

from perfonto.analysis.spark_cluster import StandaloneCluster


@pytest.mark.skipif(not hasattr(os, "sched_getaffinity") or len(os.sched_getaffinity(0)) < 2, reason="2 CPUs")
def test_pinned_workers_get_cpus_of_their_own():
    c = StandaloneCluster(workers=2, cores=1, pin=True)
    a, b = c._cpus(0), c._cpus(1)
    assert len(a) == len(b) == 1 and a != b and a | b <= os.sched_getaffinity(0)
    assert StandaloneCluster(workers=2, cores=1)._cpus(0) is None
