"""Energy sensors (issue 29, point 5): a gauge's declared averaging window marks the windows shorter than
it; an energy counter is cross-checked against the integral of its rail's power gauge, and a disagreement
beyond the declared tolerance is reported (an agreeing pair is not); the declarations are checked with
located errors; energy-per-token metrics name their token population."""

from pathlib import Path

import numpy as np
import pytest
from helpers import compile_src

from perfonto.analysis import energy_checks as ec
from perfonto.metrics.windows import Windows
from perfonto.ontology import load_generation

LIBRARY = Path(__file__).resolve().parents[1] / "metrics" / "library"


def _child(tmp_path, power: str = "", energy: str = "", name: str = "g29"):
    """A generation extending sohu whose `power.power` / `power.energy` get the given YAML flow keys."""
    body = f"generation: {name}\nextends: sohu\ndescription: energy sensors\nblocks:\n  power:\n    signals:\n"
    if power:
        body += f"      power: {{{power}}}\n"
    if energy:
        body += f"      energy: {{{energy}}}\n"
    path = tmp_path / f"{name}.yaml"
    path.write_text(body)
    return load_generation(path), path


def test_shipped_declarations(sohu):
    assert sohu.signals["power.power"].averaging_window == pytest.approx(1e-3)  # `1 ms` in seconds
    assert sohu.signals["power.energy"].cross_check == ("power.power", 0.1)
    assert sohu.signals["power.temperature"].averaging_window is None


def _windows(gen, interval, power, energy=None):
    W, C = np.shape(interval)
    v = {n: np.zeros((W, C) + tuple(s for _, s in sig.axes)) for n, sig in gen.signals.items()}
    v["power.power"] = np.asarray(power, dtype=float)
    if energy is not None:
        v["power.energy"] = np.asarray(energy, dtype=float)
    start = np.cumsum(np.r_[np.zeros((1, C)), np.asarray(interval)[:-1]], axis=0) * 1e9
    return Windows(np.asarray(interval, dtype=float), v, 1.0, start_ns=start)


def test_a_power_gauge_averaged_over_longer_than_the_window_is_marked(tmp_path):
    (gen, diags), _ = _child(tmp_path, power="averaging_window: 1 s")
    assert gen is not None, [d.render() for d in diags]
    graph = compile_src(gen, 'metric t.sensor_power [W] = power.power\n  "The sensor\'s board power."\n')
    # chip 0: windows of 0.5, 1, 2 and 0.25 s; chip 1: 1 s each (its first power reading null)
    interval = [[0.5, 1.0], [1.0, 1.0], [2.0, 1.0], [0.25, 1.0]]
    power = [[300.0, np.nan], [300.0, 310.0], [300.0, 310.0], [300.0, 310.0]]
    (m,) = ec.averaging_marks(gen, _windows(gen, interval, power), graph, chips=[0, 1])
    # shorter than 1 s: window 0 (0.5 s) and window 3 (0.25 s) of chip 0; a window of exactly 1 s is not;
    # 7 valid (window, chip) pairs, chip 1's null reading left out
    assert (m["signal"], m["averaging_window_s"], m["windows_marked"], m["windows"]) == ("power.power", 1.0, 2, 7)
    assert m["shortest_s"] == 0.25 and m["metrics"] == ["t.sensor_power"]
    assert m["first"] == [
        {"window": 0, "chip": 0, "interval_s": 0.5},
        {"window": 3, "chip": 0, "interval_s": 0.25},
    ]
    assert m["mask"].tolist() == [[True, False], [False, False], [False, False], [True, False]]
    (note,) = ec.notes([m], [])
    assert "trailing average over 1 s" in note and "2 of 7 window(s)" in note and "t.sensor_power" in note


def test_windows_as_long_as_the_sensor_window_are_not_marked(sohu):
    # sohu's sensor averages over 1 ms: windows of 1 ms and 5 ms read the window's own power, and so does
    # one of 0.9999 ms (a 1 ms period on a device clock 100 ppm slow: less than 1 % short)
    assert ec.averaging_marks(sohu, _windows(sohu, [[1e-3], [5e-3], [0.9999e-3]], [[100.0], [120.0], [90.0]])) == []
    # a 0.5 ms window is half the sensor's
    (m,) = ec.averaging_marks(sohu, _windows(sohu, [[1e-3], [5e-4]], [[100.0], [120.0]]))
    assert (m["windows_marked"], m["shortest_s"]) == (1, 5e-4)


def test_energy_counter_and_power_that_disagree_are_reported(sohu):
    # three 0.5 s windows at a steady 100 W, so the integral is 50 J per window, 150 J in all.
    # chip 0 counts 50 J per window (agrees); chip 1 counts 60 J per window: 180 J vs 150 J,
    # |180 - 150| / 180 = 1/6 = 16.7 % > the declared 10 %
    interval = np.full((3, 2), 0.5)
    power = np.full((3, 2), 100.0)
    energy = [[50.0, 60.0], [50.0, 60.0], [50.0, 60.0]]
    (c,) = ec.cross_checks(sohu, _windows(sohu, interval, power, energy), chips=[0, 1])
    assert (c["counter"], c["power"], c["tolerance"], c["disagree"]) == ("power.energy", "power.power", 0.1, [1])
    r0, r1 = c["chips"]
    assert (r0["counter_j"], r0["power_j"], r0["relative_difference"], r0["covered_s"]) == (150.0, 150.0, 0.0, 1.5)
    assert (r1["counter_j"], r1["power_j"]) == (180.0, 150.0)
    assert r1["relative_difference"] == pytest.approx(1 / 6)
    (note,) = ec.notes([], [c])
    assert "disagree beyond the declared 10 %" in note and "chip 1" in note and "16.7 %" in note


def test_energy_and_power_that_agree_are_not_reported(sohu, tmp_path):
    # chip 1 as above (16.7 %) under a declared 20 % tolerance; chip 0's last window has a null
    # energy reading, so both sums leave it out: 100 J counted vs 100 W x 1 s = 100 J
    (gen, diags), _ = _child(tmp_path, energy="cross_check: {power: power.power, tolerance: 0.2}")
    assert gen is not None, [d.render() for d in diags]
    interval = np.full((3, 2), 0.5)
    energy = [[50.0, 60.0], [50.0, 60.0], [np.nan, 60.0]]
    (c,) = ec.cross_checks(gen, _windows(gen, interval, np.full((3, 2), 100.0), energy))
    assert c["disagree"] == [] and c["tolerance"] == 0.2
    assert (c["chips"][0]["counter_j"], c["chips"][0]["power_j"], c["chips"][0]["covered_s"]) == (100.0, 100.0, 1.0)
    assert ec.notes([], [c]) == []


def test_energy_between_sums_the_windows_inside(sohu):
    # four 0.5 s windows from t = 0 on two chips, 1 J and 2 J per window: [0.5, 1.5] holds windows 1 and 2
    w = _windows(sohu, np.full((4, 2), 0.5), np.full((4, 2), 100.0), np.tile([1.0, 2.0], (4, 1)))
    between = ec.energy_between(sohu, w, "power.energy")
    # 2 windows x (1 + 2) J; the token counters of the same windows (all 0 here) come with it
    assert between(0.5, 1.5) == (6.0, 0.5, 1.5, 0.0, 0.0)
    assert between(0.6, 0.9) is None  # no whole window inside
    # a null window between two valid ones (review finding): summing the others over [0, 2] would give 9 J for
    # 12 J of work, a J/token 25 % low; the energy over that span is unknown
    e = np.tile([1.0, 2.0], (4, 1))
    e[1, 0] = np.nan
    between = ec.energy_between(sohu, _windows(sohu, np.full((4, 2), 0.5), np.full((4, 2), 100.0), e), "power.energy")
    assert between(0.0, 2.0) is None and between(1.0, 2.0)[:3] == (6.0, 1.0, 2.0)


@pytest.mark.parametrize(
    "power, energy, line, col, words",
    [  # line 7 is the overridden signal's; the column is the value's (`      power: {` is 14 characters)
        ("averaging_window: 2 W", "", 7, 33, "not a positive time"),
        ("averaging_window: -1 s", "", 7, 33, "not a positive time"),
        ("", "averaging_window: 1 s", 7, 34, "`averaging_window` is for gauges"),
        ("", "cross_check: {power: power.powr, tolerance: 0.1}", 7, 29, "not a signal"),
        ("", "cross_check: {power: power.temperature, tolerance: 0.1}", 7, 29, "x time is not in this counter's unit"),
        ("cross_check: {power: power.energy, tolerance: 0.1}", "", 7, 28, "for energy counters"),
    ],
)
def test_bad_declarations_are_located_errors(tmp_path, power, energy, line, col, words):
    (gen, diags), path = _child(tmp_path, power=power, energy=energy)
    errs = [d for d in diags if d.severity == "error"]
    assert gen is None and len(errs) == 1, [d.render() for d in diags]
    (d,) = errs
    assert d.code == "sensor" and words in d.message and d.hint
    assert (d.span.file, d.span.line, d.span.col) == (str(path), line, col)


def test_cross_check_tolerance_must_be_a_fraction(tmp_path):
    (gen, diags), _ = _child(tmp_path, energy="cross_check: {power: power.power, tolerance: 5}")
    assert gen is None and any("tolerance" in d.message for d in diags)


def test_misspelt_gauge_gets_a_suggestion(tmp_path):
    (gen, diags), _ = _child(tmp_path, energy="cross_check: {power: power.powr, tolerance: 0.1}")
    assert "power.power" in diags[0].hint


def test_energy_per_token_metrics_name_their_population(library):
    per_output, per_token = library.metrics["energy_per_output_token"], library.metrics["energy_per_token"]
    assert "output tokens only" in per_output.description
    assert "all tokens: prompt (prefilled) + output" in per_token.description
    # the unit text names the population too (issue 29 point 5): output_token is a token (units.txt), so the
    # two compare as J per token while the report and the docs say which tokens were counted
    assert (per_output.unit_text, per_token.unit_text) == ("J/output_token", "J/token")
    reg = per_output.unit._REGISTRY
    assert reg.Quantity(1.0, per_output.unit).to("J/token").magnitude == 1.0


def test_energy_per_token_windows_on_each_chips_clock_and_the_step_that_ends_at_the_edge(sohu):
    """The default run's case (a user trial): chip 1's clock is 9 ms ahead, and a step's tokens count in the
    window where it ends, the last one. Two chips, four 0.25 s windows, 1 J each; 10 output + 90 prompt tokens
    in the last window of chip 0 (the leader). Over [0, 1): every window of both chips (8 J) and 100 tokens:
    0.08 J per token (the windows on one clock from the earliest chip dropped chip 1's last window and, with
    it, read 8 J over 0 tokens)."""
    from perfonto.metrics.windows import Windows

    W, C = 4, 2
    v = {n: np.zeros((W, C) + tuple(s for _, s in sig.axes)) for n, sig in sohu.signals.items()}
    v["power.energy"] = np.ones((W, C))
    v["seq.output_tokens"][3, 0], v["seq.input_tokens"][3, 0] = 10.0, 90.0
    start = np.arange(W)[:, None] * 0.25e9 + np.array([[0.0, 9e6]])
    between = ec.energy_between(sohu, Windows(np.full((W, C), 0.25), v, 1.0, start_ns=start), "power.energy")
    joules, a, b, out, alltok = between(0.0, 1.0)
    assert (joules, a, b, out, alltok) == (8.0, 0.0, 1.0, 10.0, 100.0)
    assert joules / alltok == pytest.approx(0.08)
