"""`perfonto diff` lists the signal changes that alter results without touching unit or width: the
across-chip rule, `counted_by`, sentinels, `max_rate`, the reset indicator, stability and description
(a tester's `caelius_d` showed "no change, compatible: yes" while its hottest-chip temperature became
the sum over chips), and `check` warns of a temperature summed across chips."""

import json

from perfonto.cli import main

#: The tester's child of caelius: two changes of how values combine across chips (both policy errors on
#: stable signals) and four that change no server-level value.
CAELIUS_D = """\
generation: caelius_d
extends: caelius
description: Caelius with changed register semantics (diff test).
blocks:
  seq:
    signals:
      output_tokens: {counted_by: chip}
      elapsed_cycles: {max_rate: 5e9 core_cycle/s}
  power:
    signals:
      temperature: {across_chips: sum, sentinel: []}
  c2c:
    signals:
      replays: {stability: deprecated}
"""

#: Only changes the policy allows: a sentinel dropped, a max rate raised, a reset indicator added, a
#: deprecation and a new description.
CAELIUS_INFO = """\
generation: caelius_info
extends: caelius
description: Caelius with changes that keep every server-level value.
blocks:
  seq:
    signals:
      elapsed_cycles: {max_rate: 5e9 core_cycle/s}
      compute_cycles: {reset_indicator: seq.boot_count}
  power:
    signals:
      temperature: {sentinel: [], description: "Hottest die temperature, in hundredths of a degree."}
  c2c:
    signals:
      replays: {stability: deprecated}
"""


def _diff(tmp_path, capsys, text: str, name: str, rc: int, *extra: str) -> dict:
    child = tmp_path / f"{name}.yaml"
    child.write_text(text)
    assert main(["diff", "caelius", str(child), "--json", *extra]) == rc
    return json.loads(capsys.readouterr().out)


def _changes(doc: dict) -> dict:
    return {(c["signal"], c["field"]): c for c in doc["signals"]["changed"]}


def test_across_chips_and_counted_by_changes_are_listed_as_policy_errors(tmp_path, capsys):
    doc = _diff(tmp_path, capsys, CAELIUS_D, "caelius_d", 1)
    ch = _changes(doc)
    assert set(ch) == {
        ("power.temperature", "across_chips"),
        ("power.temperature", "sentinel"),
        ("seq.output_tokens", "counted_by"),
        ("seq.elapsed_cycles", "max_rate"),
        ("c2c.replays", "stability"),
    }
    t = ch[("power.temperature", "across_chips")]
    assert (t["old"], t["new"], t["policy"]) == ("max", "sum", "error")
    assert "server-level" in t["effect"]
    c = ch[("seq.output_tokens", "counted_by")]
    assert (c["old"], c["new"], c["policy"]) == ("leader", "chip", "error")
    sentinel = ch[("power.temperature", "sentinel")]
    assert (sentinel["old"], sentinel["new"]) == ([65535], [])
    assert ch[("seq.elapsed_cycles", "max_rate")]["old"] == "2e+09 core_cycle/s"
    assert ch[("seq.elapsed_cycles", "max_rate")]["new"] == "5e+09 core_cycle/s"
    assert ch[("c2c.replays", "stability")]["policy"] == "information"
    assert len(doc["errors"]) == 2 and not doc["compatible"]
    assert any("`power.temperature` changes across_chips from max to sum" in e for e in doc["errors"])
    assert any("`seq.output_tokens` changes counted_by from leader to chip" in e for e in doc["errors"])


def test_metrics_reading_a_signal_whose_chip_rule_changes_change_meaning(tmp_path, capsys):
    why = {m["metric"]: m["why"] for m in _diff(tmp_path, capsys, CAELIUS_D, "caelius_d", 1)["metrics"]["changed"]}
    assert any("`power.temperature`, across_chips max -> sum" in w for w in why["power.temperature_mean"])
    assert any("`seq.output_tokens`, counted_by leader -> chip" in w for w in why["tokens_per_second"])
    # `rollup max`: the server value is the hottest chip's own peak, whatever the signal's rule
    assert "power.temperature_peak" not in why
    # a sentinel, a max rate and a deprecation change no metric's meaning
    assert not any("elapsed_cycles" in w or "replays" in w for ws in why.values() for w in ws)


def test_a_metric_reading_the_signal_through_another_metric_is_listed(tmp_path, capsys):
    d = tmp_path / "folder"
    d.mkdir()
    (d / "caelius_mine.yaml").write_text("generation: caelius_mine\nextends: caelius\ndescription: as shipped.\n")
    (d / "caelius_d.yaml").write_text(CAELIUS_D.replace("extends: caelius", "extends: caelius_mine"))
    (d / "mine.metrics").write_text(
        'metric my.ktokens_per_second [token/s] = tokens_per_second / 1000\n  "Tokens per second, in thousands."\n'
    )
    assert main(["diff", "caelius_mine", "caelius_d", "--catalog", str(d), "--json"]) == 1
    doc = json.loads(capsys.readouterr().out)
    assert "my.ktokens_per_second" not in doc["metrics"]["added"]
    why = {m["metric"]: m["why"] for m in doc["metrics"]["changed"]}
    assert why["my.ktokens_per_second"] == [
        "reads, through other metrics, `seq.output_tokens`, counted_by leader -> chip: its server-level value changes"
    ]


def test_changes_that_keep_server_values_are_information(tmp_path, capsys):
    doc = _diff(tmp_path, capsys, CAELIUS_INFO, "caelius_info", 0)
    ch = _changes(doc)
    assert set(ch) == {
        ("seq.elapsed_cycles", "max_rate"),
        ("seq.compute_cycles", "reset_indicator"),
        ("power.temperature", "sentinel"),
        ("power.temperature", "description"),
        ("c2c.replays", "stability"),
    }
    assert all(c["policy"] == "information" and c["effect"] for c in ch.values())
    assert ch[("seq.compute_cycles", "reset_indicator")]["old"] is None
    assert ch[("seq.compute_cycles", "reset_indicator")]["new"] == "seq.boot_count"
    assert doc["errors"] == [] and doc["compatible"] and doc["metrics"]["changed"] == []


def test_text_output_says_what_each_change_does_and_which_break_the_policy(tmp_path, capsys):
    child = tmp_path / "caelius_d.yaml"
    child.write_text(CAELIUS_D)
    assert main(["diff", "caelius", str(child)]) == 1
    out = capsys.readouterr().out
    assert "signals changed (5):" in out
    assert (
        "power.temperature: across_chips max -> sum (server-level values of the metrics reading it change; "
        "policy error)" in out
    )
    assert "power.temperature: sentinel [65535] -> none (" in out
    assert (
        "c2c.replays: stability stable -> deprecated (no value changes; deprecation is the step before removal)" in out
    )
    assert "power.temperature_mean: reads `power.temperature`, across_chips max -> sum" in out
    assert "compatible: no (2 policy error(s)" in out


def test_an_experimental_signal_may_change_its_chip_rule_but_its_metrics_are_listed(tmp_path, capsys):
    d = tmp_path / "folder"
    d.mkdir()
    (d / "g0.yaml").write_text(
        "generation: g0\nextends: caelius\ndescription: output tokens experimental.\n"
        "blocks:\n  seq:\n    signals:\n      output_tokens: {stability: experimental}\n"
    )
    (d / "g1.yaml").write_text(
        "generation: g1\nextends: g0\ndescription: every chip counts them.\n"
        "blocks:\n  seq:\n    signals:\n      output_tokens: {counted_by: chip}\n"
    )
    assert main(["diff", "g0", "g1", "--catalog", str(d), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    [c] = doc["signals"]["changed"]
    assert (c["field"], c["policy"]) == ("counted_by", "information") and doc["errors"] == []
    assert "tokens_per_second" in {m["metric"] for m in doc["metrics"]["changed"]}


def test_a_stable_signal_going_back_to_experimental_is_a_policy_error(tmp_path, capsys):
    text = "generation: g\nextends: caelius\ndescription: one change.\nblocks:\n  seq:\n    signals:\n"
    doc = _diff(tmp_path, capsys, text + "      output_tokens: {stability: experimental}\n", "g", 1)
    [c] = doc["signals"]["changed"]
    assert (c["field"], c["old"], c["new"], c["policy"]) == ("stability", "stable", "experimental", "error")
    assert doc["errors"] == [
        "stable signal `seq.output_tokens` goes back to experimental; keep it stable, "
        "or deprecate it and add a new signal"
    ]


def test_check_warns_of_a_temperature_summed_across_chips(tmp_path, capsys):
    d = tmp_path / "cat"
    d.mkdir()
    (d / "caelius_d.yaml").write_text(CAELIUS_D)
    main(["check", "--catalog", str(d), "--generation", "caelius_d", "--no-library"])
    out = capsys.readouterr().out
    assert "caelius_d.yaml:11:20: warning[lint-summed-temperature]: gauge `power.temperature`" in out
    assert "help: write `across_chips: max` (the hottest chip) or `across_chips: avg`" in out
    assert "Traceback" not in out


def test_check_keeps_quiet_on_a_hottest_chip_and_on_summed_power(capsys):
    main(["check", "--generation", "caelius"])  # power.temperature: max; power gauges in W: sum
    assert "lint-summed-temperature" not in capsys.readouterr().out
