"""The README's catalog example works as written: a new user copied its YAML for a new counter into a
catalog folder and `perfonto check` refused it (no `generation`, no `extends`, no `description`)."""

from __future__ import annotations

import re
from pathlib import Path

from perfonto.cli import main

README = Path(__file__).resolve().parents[1] / "README.md"


def test_the_new_counter_example_checks_and_adds_its_signal(tmp_path, capsys):
    text = README.read_text()
    after = text[text.index("A new counter for future silicon") :]
    block = re.search(r"```yaml\n(.*?)```", after, re.S).group(1)
    (tmp_path / "cat").mkdir()
    (tmp_path / "cat" / "next.yaml").write_text(block)
    assert main(["check", "--catalog", str(tmp_path / "cat")]) == 0, capsys.readouterr().err
    out = capsys.readouterr()
    assert "0 error(s)" in out.out + out.err
    assert main(["explain", "hbm.weight_read_bytes", "--catalog", str(tmp_path / "cat")]) == 0


def test_a_catalog_shipped_as_a_folder_named_as_a_generation_says_how_to_select_it(capsys):
    # a new user tried `--generation linux` for the README's "shipped linux catalog"
    assert main(["explain", "context_switches.per_second", "--generation", "linux"]) == 2
    err = capsys.readouterr().err
    assert "`linux` is a catalog shipped as a folder: select it with --catalog" in err
    folder = err.split("--catalog ")[1].split()[0]
    assert main(["explain", "context_switches.per_second", "--catalog", folder]) == 0
    assert main(["explain", "mfu", "--generation", "sohux"]) == 2
    assert "shipped as a folder" not in capsys.readouterr().err


def test_the_readme_lists_every_model_the_emulator_has():
    """A new user found `project --model qwen3-14b` accepted though the README's model list lacked it."""
    import re

    import yaml

    models = yaml.safe_load((README.parent / "emulator" / "data" / "models.yaml").read_text())["models"]
    listed = re.search(r"^Models: (.*?)Generations:", README.read_text(), re.M | re.S)
    assert listed, "the README's `Models:` paragraph"
    missing = [m for m in models if f"`{m}`" not in listed.group(1)]
    assert not missing, f"README.md's model list lacks {missing}"
