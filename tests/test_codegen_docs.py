"""The docs site (``perfonto docs``): golden pages for a small fixture catalog, deterministic output for
the shipped catalog, and the content every metric entry must carry.

Refresh the golden pages only on purpose:  PERFONTO_UPDATE_GOLDEN=1 python -m pytest tests/test_codegen_docs.py
"""

import os
import subprocess
import sys
from pathlib import Path


from perfonto.codegen.docs_site import generate_site, write_site
from perfonto.metrics.catalog import shipped_others
from perfonto.metrics.compiler import compile_files
from perfonto.ontology import load_generation
from perfonto.cli import main

HERE = Path(__file__).parent
FIXTURE = HERE / "fixtures" / "docs_catalog"
GOLDEN = HERE / "golden" / "docs"


def fixture_site() -> dict[str, str]:
    graphs = {}
    for name in ("alpha", "beta"):
        gen, diags = load_generation(FIXTURE / f"{name}.yaml")
        assert gen is not None, [d.render() for d in diags]
        graphs[name] = compile_files(gen, [FIXTURE / "lib.metrics"])
        assert not graphs[name].errors, [d.render() for d in graphs[name].errors]
    return generate_site(graphs, "alpha")


def test_golden_pages():
    pages = fixture_site()
    if os.environ.get("PERFONTO_UPDATE_GOLDEN"):
        for p in GOLDEN.rglob("*.md"):
            p.unlink()
        write_site(pages, GOLDEN)
    on_disk = {str(p.relative_to(GOLDEN)): p.read_text(encoding="utf-8") for p in GOLDEN.rglob("*.md")}
    assert sorted(on_disk) == sorted(pages), (
        "pages added or removed: refresh with PERFONTO_UPDATE_GOLDEN=1 and review the diff"
    )
    for rel, text in pages.items():
        assert on_disk[rel] == text, (
            f"{rel} differs from the golden page: refresh with PERFONTO_UPDATE_GOLDEN=1 and review the diff"
        )


def test_fixture_site_content():
    pages = fixture_site()
    assert sorted(pages) == [
        "generations/alpha.md",
        "generations/beta.md",
        "groups/compute.md",
        "groups/memory.md",
        "groups/throughput.md",
        "groups/ungrouped.md",
        "index.md",
    ]
    memory = pages["groups/memory.md"]
    entry = memory[memory.index("## `mem.utilization`") :]
    entry = entry[: entry.index("## `", 5)] if "## `" in entry[5:] else entry
    for needle in (
        "- **unit**: percent (%)",
        "- **formula**: `mem.bandwidth / spec.mem.peak`",
        "Bandwidth over the peak \\| escaped \\<text\\>.",
        "- **source**: Williams et al., Roofline \\(2009\\)",
        "- **bounds**: 0 .. 100 percent",
        "- **threshold**: \\> 80 percent: memory bound",
        "| `alpha` | ✓ |",
        "| `beta` | — needs metric \\`mem.bandwidth\\`",
        "```mermaid",
        "flowchart LR",
        '(["mem.rd"])',
        '[/"spec.mem.peak"/]',
    ):
        assert needle in entry, needle
    beta = pages["generations/beta.md"]
    assert (
        "| [`mem.bandwidth`](../groups/memory.md#membandwidth) | signal \\`mem.wr\\` was removed in generation "
        "\\`beta\\` |" in beta
    )
    assert (
        "`mem.wr`" not in beta.split("## Unavailable metrics")[0]
    )  # the removed signal is not listed among beta's signals
    alpha = pages["generations/alpha.md"]
    assert "| `spec.mem.peak` | 100 | GB/s | claimed | chip | datasheet \\| page 3 | Peak memory bandwidth. |" in alpha
    assert "Elapsed cycles. (sentinel 4294967295)" in alpha
    index = pages["index.md"]
    assert "| [`mem.bandwidth`](groups/memory.md#membandwidth) | GB/s | memory, throughput | ✓ | — |" in index
    assert "\\<angle\\>" in index and "\\`backtick\\`" in index  # catalog text cannot add HTML or code


def test_shipped_docs_are_deterministic(tmp_path):
    """``perfonto docs`` twice, in fresh interpreters with different hash seeds: byte-identical trees."""
    trees = []
    for seed in ("0", "12345"):
        out = tmp_path / f"site{seed}"
        env = dict(os.environ, PYTHONHASHSEED=seed)
        proc = subprocess.run(
            [sys.executable, "-m", "perfonto", "docs", "--out", str(out)],
            capture_output=True,
            text=True,
            env=env,
            timeout=300,
        )
        assert proc.returncode == 0, proc.stderr
        trees.append({str(p.relative_to(out)): p.read_bytes() for p in sorted(out.rglob("*.md"))})
    assert trees[0] == trees[1]
    pages = {k: v.decode() for k, v in trees[0].items()}
    assert {
        "index.md",
        "generations/sohu.md",
        "generations/caelius.md",
        "generations/h100.md",
        "generations/h200.md",
        "generations/b200.md",
    } <= set(pages)
    gen, _ = load_generation("sohu")
    graph = compile_files(gen, others=shipped_others(gen))
    groups = "\n".join(v for k, v in pages.items() if k.startswith("groups/"))
    for name, m in graph.metrics.items():  # every metric has its entry, unit, formula and availability
        assert f"## `{name}`" in groups, name
        assert f"| [`{name}`](groups/" in pages["index.md"], name
    for sig in gen.signals:
        assert f"`{sig}`" in pages["generations/sohu.md"], sig
    assert groups.count("```mermaid") >= len(graph.metrics)
    assert "| `caelius` |" in groups


def test_docs_cli(tmp_path, capsys):
    assert main(["docs", "--generation", "caelius", "--out", str(tmp_path)]) == 0
    assert "Metric details as compiled for `caelius`" in (tmp_path / "index.md").read_text()
    assert main(["docs"]) == 2
    assert (
        main(["docs", "--generation", "nosuch", "--out", str(tmp_path / "x")]) == 2
    )  # an unknown generation is a usage error
