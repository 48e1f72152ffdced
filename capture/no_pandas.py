"""pandas left unloaded in perfonto's own processes.

pyarrow imports pandas, when it is installed, the first time it builds an array or converts one to
NumPy, only to ask whether what it was given is a pandas object. perfonto's command line and the Python
workers of the Spark sessions it starts never hand it one, so there an import finder answers that pandas
is not installed: measured here, 0.5-1.2 s of a process's first reads (a Spark Python worker's first host:
2.8-3.4 s with pandas loaded, 2.2-2.3 s without). ``PERFONTO_PANDAS=1`` lets pandas load; a process that
already holds pandas (a user's script, a notebook) is left alone. ``sys.modules["pandas"] = None``, Python's
own marker, is not usable: pyarrow's compiled import reads it as a module and fails. So in a blocked
process ``importlib.util.find_spec("pandas")`` raises ``ModuleNotFoundError`` too, as ``import`` does.
"""

from __future__ import annotations

import os
import sys

__all__ = ["block_pandas", "pandas_blocked"]


class _NoPandas:
    """An import finder that answers "not installed" for pandas and its submodules."""

    def find_spec(self, name, path=None, target=None):
        if name == "pandas" or name.startswith("pandas."):
            raise ModuleNotFoundError(
                "pandas is not used in this perfonto process (PERFONTO_PANDAS=1 lets it load)", name=name
            )
        return None


def pandas_blocked() -> bool:
    """Whether this process answers "not installed" for pandas (``block_pandas`` ran and took effect)."""
    return any(isinstance(f, _NoPandas) for f in sys.meta_path)


def block_pandas() -> bool:
    """Make pandas unimportable in this process, unless it is loaded already or ``PERFONTO_PANDAS`` is
    set; only for processes perfonto owns (the CLI, its Spark sessions' Python workers). Idempotent.
    Returns ``pandas_blocked()``."""
    if "pandas" not in sys.modules and not os.environ.get("PERFONTO_PANDAS") and not pandas_blocked():
        sys.meta_path.insert(0, _NoPandas())
    return pandas_blocked()
