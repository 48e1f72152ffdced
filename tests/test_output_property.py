"""Issue 28: random sequences of commands with `--out` and `--force` over a folder holding a user's files,
the command's inputs and symbolic links: no byte that existed before and that perfonto did not write
changes or disappears, and nothing is written outside the `--out` folders (and their temporary
siblings, which are gone afterwards). Replayed the same in CI (the suite's hypothesis profile)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from perfonto.cli import main

from test_output_safety import _snapshot as _tree  # every file's bytes, links as their target

OUTS = ["o", "o/inner", "in", "in/o", ".", "notes", "link", "link/o", "o2"]
COMMANDS = [
    lambda d, out, force: ["analyze", str(d / "in" / "d.csv"), "--out", out, *force],
    lambda d, out, force: ["analyze", str(d / "in"), "--out", out, *force],
    lambda d, out, force: ["export", "semconv", "--out", out, *force],
    lambda d, out, force: ["export", "perf-json", "--out", str(Path(out) / "perf.json")],
    lambda d, out, force: ["codegen", "--target", "sql", "--out", out, *force],
]


def _setup(root: Path) -> None:
    (root / "in").mkdir()
    rows = ["chip,timestamp_ns,seq.elapsed_cycles,seq.idle_cycles"] + [
        f"0,{i * 1_000_000},{(i + 1) * 1000},{i}" for i in range(12)
    ]
    (root / "in" / "d.csv").write_text("\n".join(rows) + "\n")
    (root / "notes").mkdir()
    (root / "notes" / "thesis.tex").write_text("precious")
    (root / "README.txt").write_text("mine")
    (root / "link").symlink_to(root / "notes")


def _ours(rel: str, outs: set[str]) -> bool:
    """Is ``rel`` inside one of the output folders a command was given (what perfonto may write)?"""
    return any(rel == o or rel.startswith(o.rstrip("/") + "/") or o == "." for o in outs)


@settings(
    max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow]
)
@given(
    st.lists(
        st.tuples(
            st.integers(0, len(COMMANDS) - 1),
            st.sampled_from(OUTS),
            st.booleans(),
            st.sampled_from(["", "notes/new.txt", "o/mine.txt", "o/docs/mine.md"]),
        ),
        min_size=1,
        max_size=4,
    )
)
def test_random_commands_never_touch_what_perfonto_did_not_write(tmp_path_factory, steps):
    root = tmp_path_factory.mktemp("prop")
    _setup(root)
    cwd = os.getcwd()
    os.chdir(root)
    try:
        user = _tree(root)  # every file a user (or the input) put here, with its bytes
        for k, out, force, add in steps:
            if add and (root / add).parent.is_dir():
                (root / add).write_text(f"user file {add}")
                user[add] = f"user file {add}".encode()
            main(COMMANDS[k](root, out, ["--force"] if force else []))
            now = _tree(root)
            for rel, data in user.items():  # the user's bytes, wherever a link or folder move might take them
                real = str(Path(os.path.realpath(root / rel)).relative_to(root.resolve()))
                assert now.get(rel, now.get(real)) == data, (
                    f"{rel} changed or vanished after {COMMANDS[k](root, out, force)}"
                )
            written = set(now) - set(user)
            outs = {
                str(Path(os.path.realpath(root / o)).relative_to(root.resolve())) if (root / o).exists() else o
                for _, o, _, _ in steps
            } | {o for _, o, _, _ in steps}
            stray = [
                w
                for w in written
                if not _ours(w, outs)
                and not _ours(str(Path(os.path.realpath(root / w)).relative_to(root.resolve())), outs)
            ]
            assert not stray, stray
            assert not [
                w
                for w in now
                if "/.tmp-" in w or ".tmp-" in Path(w).name or ".old-" in Path(w).name or w.endswith(".lock")
            ]
    finally:
        os.chdir(cwd)


@pytest.mark.parametrize("out", ["in", "."])
def test_an_out_holding_the_input_is_refused_even_with_force(tmp_path, capsys, out):
    _setup(tmp_path)
    before = _tree(tmp_path)
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        assert main(["analyze", "in/d.csv", "--out", out, "--force"]) == 1
    finally:
        os.chdir(cwd)
    assert "choose an --out outside it" in capsys.readouterr().err
    assert _tree(tmp_path) == before
