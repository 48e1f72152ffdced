"""The generated evaluator runs where only NumPy is installed and agrees with the reference interpreter
on the emulator's counters.

The isolated environment is a fresh venv (no pip) whose site-packages holds links to NumPy alone; the
child Python runs with -I (isolated mode), so nothing else of this environment is importable — the
test checks that by failing to import pyarrow, pint and the project itself there.
"""

import json
import subprocess
import sys
import venv
from pathlib import Path

import numpy as np
import pytest

from perfonto import emulator
from perfonto.codegen.python_evaluator import generate
from perfonto.metrics.interpreter import evaluate
from perfonto.metrics.windows import prepare, read_counters, run_level, server_level

CHILD = r"""
import importlib.util, json, os, sys
import numpy as np
os.environ.pop("PERFONTO_NO_JIT", None)  # the fallback must come from numba being absent, not from the switch
for forbidden in ("pyarrow", "pint", "metrics", "codegen", "lark", "pydantic"):
    try:
        __import__(forbidden)
    except ImportError:
        continue
    raise SystemExit(f"isolation broken: {forbidden} importable")
spec = importlib.util.spec_from_file_location("ev", sys.argv[1])
mod = importlib.util.module_from_spec(spec)
spec.loader.exec_module(mod)
data = np.load(sys.argv[2])
for level in ("window", "run", "server"):
    inputs = {k.split("/", 2)[2]: data[k] for k in data.files if k.startswith(level + "/in/")}
    out = mod.evaluate(inputs, data[level + "/interval"], float(data[level + "/chips"]))
    np.savez(sys.argv[3] + "." + level + ".npz", **out)
# the streaming evaluator falls back to its NumPy path where numba is not installed
assert mod._jit() is None
s = mod.Stream()
regs = {n: np.arange(3 * (b - a), dtype=np.uint64).reshape(3, 1, b - a) for n, a, b in mod._REGS}
blk = s.push_block(np.array([[0], [1000000], [2000000]]), regs)
assert all(v.shape[:2] == (2, 1) for v in blk.values())
print(json.dumps({"numpy": np.__version__, "metrics": len(mod.METRICS)}))
"""


def _numpy_only_python(tmp: Path) -> Path:
    env_dir = tmp / "numpy-only"
    venv.EnvBuilder(with_pip=False, system_site_packages=False).create(env_dir)
    py = env_dir / "bin" / "python"
    site = Path(
        subprocess.check_output(
            [str(py), "-I", "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], text=True
        ).strip()
    )
    here = Path(np.__file__).resolve().parent.parent
    for name in ("numpy", "numpy.libs"):
        if (here / name).exists():
            (site / name).symlink_to(here / name)
    return py


@pytest.fixture(scope="module")
def emulated(tmp_path_factory, sohu):
    out = tmp_path_factory.mktemp("emu")
    res = emulator.run(sohu, model="llama3-70b", chips=2, duration_s=0.2, sample_period_s=2e-3, seed=3, out_dir=out)
    return res


def test_generated_evaluator_numpy_only_matches_interpreter(tmp_path, sohu, library, emulated):
    if sys.platform == "win32":  # pragma: no cover
        pytest.skip("symlinked site-packages needs POSIX")
    py = _numpy_only_python(tmp_path)
    ev_path = tmp_path / "evaluator.py"
    ev_path.write_text(generate(library))
    w = prepare(read_counters(emulated.counters_path, sohu), sohu)
    run = run_level(w, sohu)
    srv = server_level(run, sohu)
    arrays = {}
    for level, win in (("window", w), ("run", run), ("server", srv)):
        arrays[f"{level}/interval"] = win.interval
        arrays[f"{level}/chips"] = np.array(win.chips)
        for k, v in win.values.items():
            arrays[f"{level}/in/{k}"] = v
    np.savez(tmp_path / "inputs.npz", **arrays)
    (tmp_path / "child.py").write_text(CHILD)
    proc = subprocess.run(
        [str(py), "-I", str(tmp_path / "child.py"), str(ev_path), str(tmp_path / "inputs.npz"), str(tmp_path / "out")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr + proc.stdout
    info = json.loads(proc.stdout)
    assert info["metrics"] == len(library.metrics)
    for level, win in (("window", w), ("run", run), ("server", srv)):
        got = np.load(tmp_path / f"out.{level}.npz")
        want = evaluate(library, win)
        assert set(got.files) == set(want)
        for name in want:
            np.testing.assert_allclose(
                got[name], want[name], rtol=1e-12, atol=0, equal_nan=True, err_msg=f"{level} {name}"
            )
        # and the real values are not all null
        assert sum(np.isfinite(want[n]).any() for n in want) >= len(want) - 2
