"""A fleet of emulated hosts for tests and benchmarks: ``perfonto emulate --fleet HOSTSxCHIPS``.

Every host runs the same serving workload through the public ``emulator.run`` (one tensor-parallel
group of CHIPS chips per host), with per-host variation from its knobs:
- **slow chips**: ``slow`` hosts (spread over the fleet) each have one chip binned slower
  (``slow_chip=(chip, slow_factor)``);
- **a throttled link**: one host has a chip-to-chip link at 1/``link_factor`` of its rate
  (``throttled_link``);
- **a hot rack**: the hosts of one rack run at an ambient temperature ``hot_delta_c`` above the
  preset's (its chips read hotter for the same power).
Hosts are named ``h000``, …; racks hold ``hosts_per_rack`` hosts (``r00``, …) and pods ``racks_per_pod``
racks (``p0``, …). Written into ``out``: ``counters/host=<host>/part-0.parquet`` (``emulator.partition``),
``topology.csv`` (host, rack, pod) and ``ground_truth.json``: every host's profile, knobs, place and
run ground truth, the slow chips, the throttled link and the hot rack. Hosts with the same knobs
share one emulation (the same seed: their counters are equal), so a large fleet costs a few runs.
"""

from __future__ import annotations

import json
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from .partition import node_truth, write_host  # noqa: F401  (node_truth: the truth of a rollup node)
from .run import run, setup


@dataclass(frozen=True)
class FleetSpec:
    """The fleet's shape and variation (module docstring)."""

    hosts: int
    chips: int
    hosts_per_rack: int = 4
    racks_per_pod: int = 2
    slow: int = 2
    slow_factor: float = 1.3
    link_factor: float = 4.0
    hot_delta_c: float = 15.0

    def place(self, h: int) -> tuple[str, str, str]:
        """(host, rack, pod) of host number ``h``."""
        rack = h // self.hosts_per_rack
        return f"h{h:03d}", f"r{rack:02d}", f"p{rack // self.racks_per_pod}"

    def profiles(self) -> dict[int, dict]:
        """Host number → its knobs: ``slow_chip``, ``throttled_link``, ``hot``."""
        H, C = self.hosts, self.chips
        racks = (H + self.hosts_per_rack - 1) // self.hosts_per_rack
        hot_rack = 1 if racks > 1 else None
        out = {
            h: {
                "slow_chip": None,
                "throttled_link": None,
                "hot": hot_rack is not None and h // self.hosts_per_rack == hot_rack,
            }
            for h in range(H)
        }
        n = min(self.slow, H)  # spread over the fleet: n distinct hosts (99 over 2 hosts made 1)
        slow_hosts = sorted({(i * H) // n for i in range(n)}) if n else []
        for i, h in enumerate(slow_hosts):
            out[h]["slow_chip"] = ((2 * i + 1) % C, self.slow_factor)
        if H > 1 and C > 1:
            h = H - 1 if (H - 1) not in slow_hosts else H - 2
            if h >= 0:
                out[h]["throttled_link"] = (0, 1, self.link_factor)
        return out


def parse_fleet(text: str) -> tuple[int, int]:
    """``"HOSTSxCHIPS"`` → (hosts, chips). Raises ``ValueError`` for anything else."""
    a, sep, b = text.lower().partition("x")
    if not sep or not a.isdigit() or not b.isdigit() or int(a) < 1 or int(b) < 1:
        raise ValueError(f"--fleet is HOSTSxCHIPS with positive integers, e.g. 4x8 (got {text!r})")
    return int(a), int(b)


def _profile_text(p: dict) -> str:
    """A host profile as words: ``chip 1 1.3 × slower, link 2:5 at 1/4 of its rate, hot rack``, or
    ``every chip and link at full speed``."""
    parts = []
    if p["slow_chip"] is not None:
        chip, factor = p["slow_chip"]
        parts.append(f"chip {chip} {factor:g} × slower")
    if p["throttled_link"] is not None:
        chip, link, factor = p["throttled_link"]
        parts.append(f"link {chip}:{link} at 1/{factor:g} of its rate")
    if p["hot"]:
        parts.append("hot rack")
    return ", ".join(parts) or "every chip and link at full speed"


def _check_size(gen, spec: FleetSpec, duration_s: float, sample_period_s: float, out: Path) -> None:
    """Refuse a fleet one of whose hosts cannot be emulated in this machine's memory or whose parts cannot
    fit on ``out``'s disk (``emulator.footprint``), before any host is emulated."""
    import shutil

    from .footprint import check_disk, check_run_fits, registers_of, rows_of
    from .run import _check_periods

    _check_periods(duration_s, sample_period_s)
    check_run_fits(gen, spec.chips, duration_s, sample_period_s)  # one host at a time
    rows = spec.hosts * rows_of(spec.chips, duration_s, sample_period_s)
    check_disk(rows, registers_of(gen), shutil.disk_usage(out).free, "the disk of --out")


def generate_fleet(
    gen,
    spec: FleetSpec,
    out: str | Path,
    *,
    model: str = "llama3-70b",
    duration_s: float = 1.0,
    sample_period_s: float = 1e-3,
    seed: int = 0,
    warmup_steps: int = 400,
    log: Callable[[str], None] = lambda s: None,
    progress: Callable[[int, int], None] | None = None,
) -> dict:
    """Emulate the fleet of ``spec`` into ``out`` (module docstring); returns the ground truth written.

    Raises:
        ValueError: bad parameters (as ``emulator.run``'s), a slow chip or link the host does not have.
    """
    out = Path(out)
    (out / "counters").mkdir(parents=True, exist_ok=True)
    _check_size(gen, spec, duration_s, sample_period_s, out)
    profiles = spec.profiles()
    _, cfg, _ = setup(gen, model=model, chips=spec.chips)
    hot = cfg.a.replace(ambient_c=cfg.a.ambient_c + spec.hot_delta_c)
    written: dict[tuple, tuple[Path, dict]] = {}
    hosts: dict[str, dict] = {}
    with tempfile.TemporaryDirectory(prefix="perfonto-fleet-") as tmp:
        for h in range(spec.hosts):
            host, rack, pod = spec.place(h)
            p = profiles[h]
            key = (p["slow_chip"], p["throttled_link"], p["hot"])
            if key not in written:
                emu_dir = Path(tmp) / f"emu{len(written)}"
                log(f"emulating profile {len(written)} ({_profile_text(p)}) for {host}")
                res = run(
                    gen,
                    model=model,
                    chips=spec.chips,
                    duration_s=duration_s,
                    sample_period_s=sample_period_s,
                    seed=seed,
                    warmup_steps=warmup_steps,
                    out_dir=emu_dir,
                    slow_chip=p["slow_chip"],
                    throttled_link=p["throttled_link"],
                    assumptions=hot if p["hot"] else None,
                    trace_detail="step",
                )
                path = write_host(res.counters_path, out / "counters", host)
                written[key] = (path, res.ground_truth)
            else:
                write_host(Path(), out / "counters", host, reuse=written[key][0])
            hosts[host] = {
                "rack": rack,
                "pod": pod,
                "profile": list(written).index(key),
                "knobs": p,
                "truth": written[key][1],
            }
            if progress:
                progress(h + 1, spec.hosts)
    with open(out / "topology.csv", "w", encoding="utf-8") as f:
        # an empty chip places every chip of the host; the column is there so that SQL can join on it
        f.write("host,chip,rack,pod\n" + "".join(f"{h},,{v['rack']},{v['pod']}\n" for h, v in hosts.items()))
    slow = [[h, v["knobs"]["slow_chip"][0]] for h, v in hosts.items() if v["knobs"]["slow_chip"]]
    link = [[h, *v["knobs"]["throttled_link"][:2]] for h, v in hosts.items() if v["knobs"]["throttled_link"]]
    racks = sorted({v["rack"] for v in hosts.values() if v["knobs"]["hot"]})
    truth = {
        "fleet": {
            "hosts": spec.hosts,
            "chips": spec.chips,
            "model": model,
            "duration_s": duration_s,
            "sample_period_s": sample_period_s,
            "seed": seed,
            "spec": spec.__dict__,
        },
        "slow_chips": slow,
        "throttled_links": link,
        "hot_racks": racks,
        "hosts": hosts,
    }
    (out / "ground_truth.json").write_text(json.dumps(truth, indent=1), encoding="utf-8")
    return truth
