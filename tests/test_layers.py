"""The import direction is enforced: import-linter's contracts (pyproject.toml) pass on the installed
tree, and fail on a deliberate upward import."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

pytest.importorskip("importlinter", reason="import-linter is in the test extras: pip install -e '.[test]'")


@pytest.fixture(scope="module")
def tree(tmp_path_factory):
    t = tmp_path_factory.mktemp("installed")
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(t), str(ROOT)],
        check=True,
        capture_output=True,
        timeout=600,
    )
    return t


def _lint(tree: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["bash", str(ROOT / ".ci" / "lint-imports"), str(tree)], capture_output=True, text=True, timeout=300
    )


def test_contracts_hold(tree):
    r = _lint(tree)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "4 kept, 0 broken" in r.stdout


@pytest.mark.parametrize(
    "where, line, broken",
    [
        ("ontology", "from perfonto.analysis import bottleneck", "layers"),
        ("capture", "from perfonto.metrics import windows", "layers"),
        ("emulator", "from perfonto.metrics import windows", "the emulator knows the ontology only"),
        ("analysis", "from perfonto import emulator", "nothing downstream of the dump knows the emulator"),
    ],
)
def test_an_upward_import_fails(tree, tmp_path, where, line, broken):
    bad = tmp_path / "tree"
    shutil.copytree(tree, bad)
    (bad / "perfonto" / where / "_upward.py").write_text(line + "\n")
    r = _lint(bad)
    assert r.returncode != 0
    assert "BROKEN" in r.stdout and broken in r.stdout
