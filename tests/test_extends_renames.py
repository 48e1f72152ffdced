"""A generation that ``extends`` a shipped one: renames, removals and overrides (caelius report,
findings 1, 4, 6 and 9).

1. A ``renamed:`` entry onto a name that is taken — a signal of the parent, a new signal of the same
   file, another rename's target — is a ``rename-target`` error at the entry (it used to merge the
   two signals: ``input_tokens_per_second`` read the output-token counter, with 0 errors).
4. Removing a signal the parent renamed (caelius's ``c2c.replays``, sohu's ``c2c.retries``) makes the
   library's metrics over it unavailable, as any removal does, and drops it from the inherited
   ``counter_slots.fixed`` (it used to be an ``unknown-name`` error in the shipped library).
6. A metric of the catalog folder's own files reading a removed signal is unavailable with a
   ``removed-signal`` warning at the name; the shipped library's stay silent.
9. An inherited value that the child's override made wrong (a fixed counter turned into a gauge, the
   counter's width and binding) is reported at the child's ``kind``, naming the parent's line.
"""

from pathlib import Path

from perfonto.cli import main
from perfonto.metrics.catalog import load_catalog
from perfonto.ontology.loader import catalog_dir, load_generation

SOHU = catalog_dir() / "sohu.yaml"


def _folder(tmp_path: Path, files: dict[str, str]) -> Path:
    d = tmp_path / "cat"
    d.mkdir()
    for name, text in files.items():
        (d / name).write_text(text)
    return d


def _line_of(path: Path, needle: str) -> int:
    """The 1-based line of ``path`` holding ``needle`` (the shipped file's lines are not hard-coded)."""
    return next(i for i, line in enumerate(path.read_text().split("\n"), 1) if needle in line)


def _errors(diags):
    return [d for d in diags if d.severity == "error"]


# ---- 1. renames onto a taken name ----------------------------------------------------------------


def test_a_rename_onto_a_parent_signal_is_an_error_at_the_entry(tmp_path, capsys):
    d = _folder(
        tmp_path,
        {
            "caelius6.yaml": "generation: caelius6\nextends: caelius\ndescription: a slip of the pen\n"
            "renamed: {seq.input_tokens: seq.output_tokens}\n"
        },
    )
    gen, diags = load_generation(d / "caelius6.yaml")
    assert gen is None
    (e,) = _errors(diags)
    # line 4 is `renamed: {seq.input_tokens: seq.output_tokens}`; the new name starts at column 10 + 18 + 1
    assert (e.code, e.span.file, e.span.line, e.span.col) == ("rename-target", str(d / "caelius6.yaml"), 4, 29)
    out_line = _line_of(SOHU, "      output_tokens:")
    assert f"`seq.output_tokens` is already a signal of `caelius` (declared at {SOHU}:{out_line}:" in e.message
    assert "rename `seq.input_tokens` to a name no signal of `caelius` has" in e.hint
    assert main(["check", "--catalog", str(d)]) == 1
    out = "".join(capsys.readouterr())
    assert f"{d / 'caelius6.yaml'}:4:29: error[rename-target]" in out and "Traceback" not in out


def test_a_rename_onto_a_new_signal_of_the_same_file_is_an_error(tmp_path):
    d = _folder(
        tmp_path,
        {
            "caelius5.yaml": "generation: caelius5\nextends: caelius\ndescription: rename and declare\n"
            "renamed: {c2c.replays: c2c.crc_errors}\n"
            "blocks:\n  c2c:\n    signals:\n"
            '      crc_errors: {kind: counter, unit: event, width: 32, description: "CRC errors."}\n'
        },
    )
    gen, diags = load_generation(d / "caelius5.yaml")
    assert gen is None
    (e,) = _errors(diags)
    # `renamed: {c2c.replays: c2c.crc_errors}`: the new name at column 10 + 13 + 1; the declaration on line 8
    assert (e.code, e.span.line, e.span.col) == ("rename-target", 4, 24)
    assert "`c2c.crc_errors` is also declared as a new signal in this file (line 8)" in e.message
    assert "drop `kind` from `c2c.crc_errors`'s entry" in e.hint


def test_two_renames_onto_one_name_are_an_error(tmp_path):
    d = _folder(
        tmp_path,
        {
            "c.yaml": "generation: c\nextends: caelius\ndescription: two onto one\n"
            "renamed: {c2c.replays: c2c.errs, c2c.busy_cycles: c2c.errs}\n"
        },
    )
    gen, diags = load_generation(d / "c.yaml")
    assert gen is None
    (e,) = _errors(diags)
    # the second entry's value: `renamed: {c2c.replays: c2c.errs, c2c.busy_cycles: ` is 50 characters
    assert (e.code, e.span.line, e.span.col) == ("rename-target", 4, 51)
    assert "`c2c.busy_cycles` and `c2c.replays` are both renamed to `c2c.errs`" in e.message


def test_a_rename_to_a_free_name_still_moves_the_register_and_an_entry_without_kind_overrides_it(tmp_path):
    d = _folder(
        tmp_path,
        {
            "c.yaml": "generation: c\nextends: caelius\ndescription: a good rename\n"
            "renamed: {seq.input_tokens: seq.prompt_tokens}\n"
            'blocks:\n  seq:\n    signals:\n      prompt_tokens: {description: "Prompt tokens prefilled."}\n'
        },
    )
    cat = load_catalog(d, None, cache=False)
    assert not cat.errors, [x.render() for x in cat.errors]
    sig = cat.generation.signals["seq.prompt_tokens"]
    old, _ = load_generation("caelius")
    assert (sig.kind, sig.unit_text, sig.description) == ("counter", "token", "Prompt tokens prefilled.")
    assert sig.id == old.signals["seq.input_tokens"].id  # the same register, under its new name
    # the library's metric reads the prompt-token register, and the output-token one is still its own
    assert cat.graph.metrics["input_tokens_per_second"].signal_deps == ("seq.prompt_tokens",)
    assert cat.graph.metrics["output_tokens_per_second"].signal_deps == ("seq.output_tokens",)


# ---- 4. removing a signal the parent renamed -----------------------------------------------------


def test_removing_a_renamed_signal_makes_its_metrics_unavailable(tmp_path, capsys):
    d = _folder(
        tmp_path,
        {
            "caelius3.yaml": "generation: caelius3\nextends: caelius\ndescription: no replay counter\n"
            "removed: [c2c.replays]\n"
        },
    )
    cat = load_catalog(d, None, cache=False)
    assert not cat.errors, [x.render() for x in cat.errors]
    reason = "signal `c2c.replays` (`c2c.retries` before a rename) was removed in generation `caelius3`"
    assert cat.graph.unavailable["c2c.retry_rate"] == reason
    assert not [x for x in cat.diagnostics if x.code == "renamed-signal"]  # no "write `c2c.replays`"
    # sohu's `counter_slots.fixed: [retries]`, inherited, loses the removed counter as for any removal
    assert cat.generation.blocks["c2c"]["counter_slots"]["fixed"] == ()
    assert main(["check", "--catalog", str(d)]) == 0
    assert "0 error(s), 0 warning(s)" in "".join(capsys.readouterr())


def test_a_removed_hint_names_the_current_name_of_a_renamed_signal(tmp_path):
    d = _folder(
        tmp_path,
        {"c.yaml": "generation: c\nextends: caelius\ndescription: old name\nremoved: [c2c.retries]\n"},
    )
    _, diags = load_generation(d / "c.yaml")
    (e,) = _errors(diags)
    assert (e.code, e.span.line, e.span.col) == ("unknown-name", 4, 11)
    assert e.hint == "`c2c.retries` was renamed to `c2c.replays` in `caelius`: write `c2c.replays`"


def test_a_signal_declared_again_after_a_removal_is_a_signal(tmp_path):
    d = _folder(
        tmp_path,
        {
            "c.yaml": "generation: c\nextends: caelius\ndescription: refresh counter back\n"
            "blocks:\n  hbm:\n    signals:\n"
            '      refresh_cycles: {kind: counter, unit: hbm_cycle, width: 48, description: "Refresh cycles."}\n'
        },
    )
    cat = load_catalog(d, None, cache=False)
    assert "hbm.refresh_cycles" not in cat.generation.removed
    assert "hbm.refresh_overhead" in cat.graph.metrics and "hbm.refresh_overhead" not in cat.graph.unavailable


def test_a_group_constraint_left_with_one_counter_by_a_removal_is_dropped(tmp_path):
    parent = (
        "generation: p\nextends: sohu\ndescription: rules\nblocks:\n  c2c:\n"
        "    group_constraints: [{together: [retries, busy_cycles]}]\n"
    )
    d = _folder(
        tmp_path, {"p.yaml": parent, "c.yaml": "generation: c\nextends: p\ndescription: x\nremoved: [c2c.retries]\n"}
    )
    gen, diags = load_generation(d / "c.yaml")
    assert gen is not None, [x.render() for x in diags]
    assert gen.blocks["c2c"]["counter_slots"]["together"] == ()


def test_a_fixed_counter_renamed_out_of_its_block_is_reported_at_the_rename(tmp_path):
    d = _folder(
        tmp_path,
        {"c.yaml": "generation: c\nextends: caelius\ndescription: moved\nrenamed: {c2c.replays: pcie.replays}\n"},
    )
    _, diags = load_generation(d / "c.yaml")
    slots, binding = sorted(_errors(diags), key=lambda e: e.code)
    # both at the new name of `renamed: {c2c.replays: pcie.replays}` (column 10 + 13 + 1)
    assert {(e.span.file, e.span.line, e.span.col) for e in (slots, binding)} == {(str(d / "c.yaml"), 4, 24)}
    fixed_line, sig_line = _line_of(SOHU, "fixed: [retries]"), _line_of(SOHU, "      retries:")
    assert slots.code == "counter-slots"
    assert f"inherited `counter_slots.fixed` of block `c2c` ({SOHU}:{fixed_line}:" in slots.message
    assert "`blocks: {c2c: {counter_slots: {fixed: []}}}`" in slots.hint
    # sohu's `split: links_each` needs instances, which `pcie` has not: the rename made it wrong
    assert binding.code == "emulator-binding" and f"inherited from {SOHU}:{sig_line}:" in binding.message
    assert "this file renames `c2c.replays` to `pcie.replays`" in binding.message


# ---- 6. a user's metric over a removed signal ----------------------------------------------------

USER_METRICS = """\
metric own.conflicts [percent] = avg(sram.bank_conflict_cycles) / seq.elapsed_cycles
  "Bank conflict share."
metric own.refresh [percent] = avg(hbm.refresh_cycles) / (spec.clock.hbm * interval)
  "Refresh share."
metric own.safe [core_cycle] = default(sum(sram.bank_conflict_cycles), 0 core_cycle)
  "Bank conflict share, 0 where the counter is absent."
"""


def test_a_folder_metric_over_a_removed_signal_warns_at_the_name(tmp_path, capsys):
    d = _folder(
        tmp_path,
        {
            "c.yaml": "generation: c\nextends: caelius\ndescription: no conflicts\n"
            "removed: [sram.bank_conflict_cycles]\n",
            "own.metrics": USER_METRICS,
        },
    )
    cat = load_catalog(d, None, cache=False)
    assert not cat.errors, [x.render() for x in cat.errors]
    warned = [x for x in cat.diagnostics if x.code == "removed-signal"]
    own = str(d / "own.metrics")
    # line 1: `metric own.conflicts [percent] = avg(` is 37 characters; line 3: `metric own.refresh [percent] = avg(` 35
    assert [(x.span.file, x.span.line, x.span.col) for x in warned] == [(own, 1, 38), (own, 3, 36)]
    assert warned[0].message == (
        "metric `own.conflicts` reads `sram.bank_conflict_cycles`, which `c` removes: the metric is unavailable on `c`"
    )
    assert "which `caelius` removed (`c` extends it)" in warned[1].message
    assert set(cat.graph.unavailable) >= {"own.conflicts", "own.refresh", "sram.bank_conflict_ratio"}
    assert "own.safe" in cat.graph.metrics  # `default(x, d)`: available, and no warning
    # the library's metrics over the removed signals stay silent (unavailable only)
    assert all(x.span.file == own for x in warned)
    assert main(["check", "--catalog", str(d)]) == 0
    assert f"{own}:1:38: warning[removed-signal]" in "".join(capsys.readouterr())


# ---- 9. an inherited value the child's override made wrong ---------------------------------------


def test_a_fixed_counter_turned_into_a_gauge_is_reported_at_the_child(tmp_path):
    child = (
        "generation: c\nextends: caelius\ndescription: ecc as a level\nblocks:\n  hbm:\n    signals:\n"
        '      ecc_corrected: {kind: gauge, description: "ECC errors, as a level."}\n'
    )
    d = _folder(tmp_path, {"c.yaml": child})
    _, diags = load_generation(d / "c.yaml")
    errs = _errors(diags)
    # every error at the child's `kind` (line 7, column 28 + 1), none in the shipped file
    assert {(e.span.file, e.span.line, e.span.col) for e in errs} == {(str(d / "c.yaml"), 7, 29)}
    by_code = {e.code: e for e in errs}
    assert set(by_code) == {"counter-slots", "gauge-width", "emulator-binding"}
    fixed_line, sig_line = _line_of(SOHU, "fixed: [ecc_corrected]"), _line_of(SOHU, "      ecc_corrected:")
    slots = by_code["counter-slots"]
    assert f"the inherited `counter_slots.fixed` of block `hbm` ({SOHU}:{fixed_line}:" in slots.message
    assert slots.hint.startswith("override it in this file: `blocks: {hbm: {counter_slots: {fixed: []}}}`")
    assert f"`width` is inherited from {SOHU}:{sig_line}:" in by_code["gauge-width"].message
    assert by_code["gauge-width"].hint.startswith("override `width` in this file's entry for `hbm.ecc_corrected`")
    assert f"`emulator` is inherited from {SOHU}:{sig_line}:" in by_code["emulator-binding"].message


def test_a_name_renamed_back_is_a_signal_not_an_alias_of_itself(tmp_path, capsys):
    d = _folder(
        tmp_path,
        {"c.yaml": "generation: c\nextends: caelius\ndescription: back\nrenamed: {c2c.replays: c2c.retries}\n"},
    )
    cat = load_catalog(d, None, cache=False)
    assert not cat.errors, [x.render() for x in cat.errors]
    assert cat.generation.aliases == {"c2c.replays": "c2c.retries"}
    assert not [x for x in cat.diagnostics if x.code == "renamed-signal"]  # not "`c2c.retries` was renamed to itself"
    assert cat.graph.metrics["c2c.retry_rate"].signal_deps == ("c2c.retries",)
