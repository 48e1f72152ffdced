"""``perfonto docs --catalog DIR`` documents the folder's own generation when the folder also holds test
vectors naming it (``*.vectors.yaml`` has a ``generation:`` key): the vectors file counted as a second
generation, no single one was found, and the site quietly documented ``sohu`` instead (a tester's new
generation got no page, and the index said "sohu: 0 of 116 metrics available")."""

from __future__ import annotations

from perfonto.cli import main


def test_a_vectors_file_does_not_hide_the_folders_generation(tmp_path, capsys):
    cat = tmp_path / "cat"
    cat.mkdir()
    (cat / "sohu_next.yaml").write_text("generation: sohu_next\nextends: sohu\ndescription: a child generation\n")
    (cat / "t.vectors.yaml").write_text("generation: sohu_next\nvectors: []\n")
    assert main(["docs", "--catalog", str(cat), "--out", str(tmp_path / "site")]) == 0
    capsys.readouterr()
    pages = sorted(p.name for p in (tmp_path / "site" / "generations").glob("*.md"))
    assert "sohu_next.md" in pages
