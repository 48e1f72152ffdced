"""``--engine spark``'s job times (``spark_kernel._job_stats``): the tasks' timings summed into the pass's
stats, Python workers counted by their first task only."""

import pytest

from perfonto.analysis.spark_kernel import _job_stats


def test_job_stats_sum_the_tasks_and_count_fresh_python_workers():
    timings = [
        {"start": 0.0, "setup": 0.5, "setup_cpu": 0.25, "host": 4.0, "host_cpu": 3.0, "fresh": True},
        {"start": 4.5, "setup": 0.0, "setup_cpu": 0.0, "host": 2.0, "host_cpu": 1.5, "fresh": False},
        {"start": 0.1, "setup": 0.75, "setup_cpu": 0.5, "host": 3.0, "host_cpu": 2.0, "fresh": True},
    ]
    stats = {"pieces": 7}
    _job_stats(stats, 12.5, timings)
    assert stats["pieces"] == 7 and stats["spark seconds"] == 12.5
    assert stats["spark python workers"] == 2
    assert stats["spark setup seconds"] == pytest.approx(1.25)
    assert stats["spark setup cpu seconds"] == pytest.approx(0.75)
    assert stats["spark host seconds"] == pytest.approx(9.0)
    assert stats["spark host cpu seconds"] == pytest.approx(6.5)
