"""Small helpers shared by tests (importable as `helpers`; pytest puts tests/ on sys.path)."""

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from perfonto.cli import main
from perfonto.metrics.catalog import load_catalog
from perfonto.metrics.compiler import compile_texts
from perfonto.ontology.loader import load_generation

#: The tool catalogs perfonto ships, one folder per tool (``perfonto/catalogs/<tool>``).
TOOL_CATALOGS = Path(__file__).parents[1] / "perfonto" / "catalogs"


def compile_src(gen, text: str, name: str = "t.metrics"):
    return compile_texts(gen, {name: text})


#: A generation of 8 memory channels at 1 GHz, each with a 32-bit byte counter (``mem.read_bytes``):
#: the start of the catalogs that tests of instances, slots and counter semantics write.
MEM8_YAML = """\
generation: base
description: 8 memory channels
clock_domains:
  core: {frequency: {value: 1, unit: GHz, provenance: assumed}}
blocks:
  mem:
    description: memory channels
    clock: core
    instances: {channel: 8}
    signals:
      read_bytes: {kind: counter, unit: B, width: 32, description: bytes read}
"""


#: The start of a generation ``tiny`` of one monitored block ``pmu`` with a free-running ``cycles``
#: counter, for the collection planner's tests: ``str.format`` fields ``{slots}`` (its ``counter_slots``)
#: and ``{constraints}`` (its ``group_constraints``); each test's catalog adds its signals after it.
PMU_YAML = """\
generation: tiny
description: planner test
clock_domains:
  core: {{frequency: {{value: 1, unit: GHz, provenance: assumed}}}}
blocks:
  pmu:
    description: one monitored block
    clock: core
    counter_slots: {slots}
    group_constraints: {constraints}
    signals:
      cycles: {{kind: counter, unit: core_cycle, width: 32, description: free-running cycles}}
"""


def one_block_yaml(generation: str, signals: str, *, block: str = "b", instances: str = "", extends: str = "") -> str:
    """A generation of one block on a 1 GHz clock whose signals are the YAML lines ``signals`` (indented six
    spaces); ``instances``: the block's instance axes (a flow map), ``extends``: its parent generation. Without
    either, the first signal stands on line 10."""
    return (
        f"generation: {generation}\n"
        + (f"extends: {extends}\n" if extends else "")
        + "description: a test generation\n"
        "clock_domains:\n"
        "  core: {frequency: {value: 1, unit: GHz, provenance: assumed, source: test}}\n"
        f"blocks:\n  {block}:\n    description: a block\n    clock: core\n"
        + (f"    instances: {instances}\n" if instances else "")
        + f"    signals:\n{signals}"
    )


def generation_from_yaml(path: Path, text: str):
    """The generation the YAML ``text``, written to ``path``, loads as (the test fails with the loader's
    diagnostics where it loads none)."""
    path.write_text(text)
    g, diags = load_generation(path)
    assert g is not None, [d.render() for d in diags]
    return g


def tool_generation(tool: str, generation: str | None = None):
    """The generation of the shipped ``tool`` catalog, compiled alone (no metric library, no cache)."""
    return load_catalog(TOOL_CATALOGS / tool, generation, library=False, cache=False).generation


def tool_generation_fixture(tool: str, generation: str | None = None):
    """A module-scoped fixture giving ``tool_generation(tool, generation)``, for a test module to take as its
    ``gen`` (``gen = tool_generation_fixture("ncu")``): the generation is compiled once per module."""
    return pytest.fixture(scope="module")(lambda: tool_generation(tool, generation))


def analyze(capsys, path, out, *extra) -> tuple[int, dict]:
    """``perfonto analyze PATH --out OUT --json EXTRA…`` in this process: its exit code and its JSON
    document (``capsys``: the test's, emptied first)."""
    capsys.readouterr()
    code = main(["analyze", str(path), "--out", str(out), "--json", *extra])
    return code, json.loads(capsys.readouterr().out)


def analyze_err(capsys, path, out, *extra) -> tuple[int, dict, str]:
    """As ``analyze``, with what the command wrote on stderr (its notes and errors) too."""
    capsys.readouterr()
    code = main(["analyze", str(path), "--out", str(out), "--json", *extra])
    got = capsys.readouterr()
    return code, json.loads(got.out), got.err


def analyze_windows(capsys, path, out, generation: str) -> tuple[dict, dict]:
    """``analyze`` of ``path`` into ``out``, which must succeed reading it as ``generation``: its JSON document
    and its per-window metrics (``metrics.parquet``, column → values)."""
    code, doc = analyze(capsys, path, out)
    assert code == 0 and doc["generation"] == generation, doc
    return doc, pq.read_table(Path(out) / "metrics.parquet").to_pydict()


#: The engine of the first emulator (8192-token steps, chunked prompts, up to 1024 requests): for tests
#: of the counters, trace and records that need many short steps in a sub-second run. ``run`` and
#: ``project`` otherwise size the engine as the preset prescribes (trtllm-bench's sizing for Sohu's
#: conservative preset: 32,768-token steps of whole prompts, ~0.3 s each).
SHORT_STEPS = dict(token_budget=8192, max_batch=1024, chunked_prefill=True)
