"""Run options that asked the emulator for the impossible: found by a session trying to break perfonto.
`--slow-chip 0:1e9` ran out of memory (617 GiB asked; "internal error"), `0:1e4` ran for minutes (one
engine step of 828 s), `--warmup-steps 100000000` ran for hours with nothing printed, and
`emulate --fleet 2x2 --slow-chips 99` silently made one slow chip. Each is now refused at once, saying
the range."""

from __future__ import annotations

import time

import pytest

from perfonto.cli import main
from perfonto.emulator.fleet import FleetSpec


#: option → what the refusal says (each value asked the emulator for the impossible before)
REFUSED = {
    "--slow-chip 0:1e9": "slow_chip factor must be a number from 1 to 100",
    "--slow-chip 0:1e4": "slow_chip factor must be a number from 1 to 100",
    "--throttled-link 0:0:1e9": "throttled_link factor must be a number from 1 to 100",
    "--warmup-steps 100000000": "warmup_steps must be a whole number between 0 and 100000",
}


@pytest.mark.parametrize("option", sorted(REFUSED))
def test_out_of_range_run_options_are_refused_at_once(tmp_path, capsys, option):
    argv, want = option.split(), REFUSED[option]
    t0 = time.monotonic()
    rc = main(
        ["run", "--model", "llama-3.1-8b", "--chips", "2", "--duration", "20ms", *argv, "--out", str(tmp_path / "o")]
    )
    err = capsys.readouterr().err
    assert rc == 1 and want in err and "internal error" not in err, err
    assert time.monotonic() - t0 < 30 and not (tmp_path / "o").exists()


def test_more_slow_chips_than_hosts_is_a_usage_error_and_slow_hosts_are_distinct(tmp_path, capsys):
    assert (
        main(["emulate", "--fleet", "2x2", "--duration", "10ms", "--slow-chips", "99", "--out", str(tmp_path / "f")])
        == 2
    )
    assert "the fleet has 2 host(s)" in capsys.readouterr().err
    slow = lambda spec: [h for h, p in spec.profiles().items() if p["slow_chip"]]  # noqa: E731
    assert slow(FleetSpec(2, 2, slow=2)) == [0, 1] and slow(FleetSpec(8, 4, slow=3)) == [0, 2, 5]


def test_a_run_that_cannot_fit_in_memory_is_refused_with_its_figures(tmp_path, capsys):
    """`run --duration 23h --sample-period 1us` failed after the scheduling with "internal error:
    MemoryError: Unable to allocate 617. GiB"; `--duration 23h` at 1 ms ran on towards ~7 TB."""
    t0 = time.monotonic()
    rc = main(["run", "--duration", "23h", "--sample-period", "1us", "--out", str(tmp_path / "o")])
    err = capsys.readouterr().err
    assert rc == 1 and "internal error" not in err, err
    assert "82,800,000,002 samples of 8 chips" in err and "give a longer --sample-period" in err, err
    assert time.monotonic() - t0 < 30 and not (tmp_path / "o").exists()
    rc = main(["emulate", "--fleet", "2x8", "--duration", "23h", "--out", str(tmp_path / "f")])
    assert rc == 1 and "82,800,002 samples of 8 chips" in capsys.readouterr().err
    assert not (tmp_path / "f").exists()


def test_the_memory_estimate_by_hand():
    """10 s at 1 ms on 8 chips: 10,002 samples × 8 chips = 80,016 rows; × 279 registers × 40 B = 893.0 MB,
    which fits in 1 GB and not in 0.8 GB; at most 0.8e9 / (8 × 279 × 40) × 1 ms = 8.96 s fits then."""
    from perfonto.emulator.footprint import check_fits
    from perfonto.emulator.knobs import WorkloadError

    check_fits(8, 279, 10.0, 1e-3, 10**9)
    check_fits(8, 279, 1e6, 1e-3, None)  # the memory unknown: nothing refused
    with pytest.raises(WorkloadError, match=r"10,002 samples of 8 chips × 279 registers need about 893\.0 MB") as e:
        check_fits(8, 279, 10.0, 1e-3, 8 * 10**8)
    assert "at most about 9 s at this period" in str(e.value)


def test_a_fleet_that_cannot_fit_on_the_disk_is_refused_before_any_host(tmp_path, capsys):
    """`emulate --fleet 100000x8` (~360 GB) ran on until the disk filled; this one asks for ~33 TB (each
    host's 8,016 rows fit in memory): 10,000,000 hosts × 8 chips × 1,002 samples = 80,160,000,000 rows ×
    279 registers × 1.5 B = 33.5 TB."""
    t0 = time.monotonic()
    rc = main(["emulate", "--fleet", "10000000x8", "--out", str(tmp_path / "f")])
    err = capsys.readouterr().err
    assert rc == 1 and "80,160,000,000 rows of 279 registers need about 33.5 TB on disk" in err, err
    assert time.monotonic() - t0 < 30
    assert "emulating profile" not in err and not (tmp_path / "f").exists()


def test_the_disk_estimate_by_hand():
    """2 × 8 chips × 1,002 samples = 16,032 rows × 279 registers × 1.5 B = 6,709,392 B."""
    from perfonto.emulator.footprint import check_disk
    from perfonto.emulator.knobs import WorkloadError

    check_disk(16_032, 279, 6_709_392, "here")
    with pytest.raises(WorkloadError, match="need about 6.7 MB on disk and here has 6.7 MB free"):
        check_disk(16_032, 279, 6_709_391, "here")


def test_a_containers_memory_limit_caps_what_is_available(monkeypatch):
    """MemAvailable is the host's: a container with a 4 GB cgroup limit, 1 GB of it used, is killed past 3
    GB whatever the host has free (a review). With 24 GB available on the host: 3 GB; with no limit
    ("max"): 24 GB."""
    from perfonto.emulator import footprint

    monkeypatch.setattr(footprint, "_meminfo_available", lambda: 24 * 10**9)
    files = {"/sys/fs/cgroup/memory.max": 4 * 10**9, "/sys/fs/cgroup/memory.current": 10**9}
    monkeypatch.setattr(footprint, "_read_int", files.get)
    assert footprint.available_memory() == 3 * 10**9
    monkeypatch.setattr(footprint, "_read_int", lambda path: None)  # `max`, or no cgroup files
    assert footprint.available_memory() == 24 * 10**9
