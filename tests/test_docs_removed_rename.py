"""The docs site's signal availability on a generation that removed a renamed signal: `caelius` renames
sohu's `c2c.retries` to `c2c.replays`, and a child of it removes `c2c.replays`. The site said the child
had `c2c.retries` "as `c2c.replays`"; it says the child removed it."""

from pathlib import Path

from perfonto.codegen.docs import _anchor
from perfonto.codegen.docs_site import generate_site
from perfonto.metrics.catalog import load_catalog


def _graphs(tmp_path: Path) -> dict:
    d = tmp_path / "cat"
    d.mkdir()
    (d / "caelius3.yaml").write_text(
        "generation: caelius3\nextends: caelius\ndescription: no replay counter\nremoved: [c2c.replays]\n"
    )
    out = {}
    for folder, name in ((None, "sohu"), (None, "caelius"), (d, None)):
        cat = load_catalog(folder, name, cache=False)
        assert not cat.errors, [x.render() for x in cat.errors]
        out[cat.generation.name] = cat.graph
    return out


def _row(page: str, signal: str) -> str:
    return next(line for line in page.split("\n") if line.startswith(f'| <a id="{_anchor(signal)}"></a>'))


def test_a_removed_new_name_is_shown_removed_not_renamed(tmp_path):
    pages = generate_site(_graphs(tmp_path), "sohu")
    # columns sohu | caelius | caelius3, then the metrics that read it
    old = _row(pages["generations/sohu.md"], "c2c.retries")
    assert "| ✓ | as `c2c.replays` | removed in `caelius3` (renamed to `c2c.replays` before) |" in old, old
    assert "as `c2c.replays` | as `c2c.replays`" not in old
    new = _row(pages["generations/caelius.md"], "c2c.replays")
    assert "| — | ✓ | removed in `caelius3` |" in new, new


def test_a_signal_removed_under_its_own_name_says_where(tmp_path):
    """`caelius` removes sohu's `hbm.refresh_cycles` (no rename): its cell names `caelius`, and the child
    that inherits the removal names `caelius` too."""
    old = _row(generate_site(_graphs(tmp_path), "sohu")["generations/sohu.md"], "hbm.refresh_cycles")
    assert "| ✓ | removed in `caelius` | removed in `caelius` |" in old, old
