"""A Ctrl-C that a library swallows still stops the run: ``output_folder`` remembers SIGINT (as it does
SIGTERM) and never commits an interrupted run's output. Found in CI: ``perfonto run`` sent SIGINT on a
cold cache exited 0 with its whole output written (tests/test_outputs.py::test_interrupted_run_leaves_no_folder)."""

import os
import signal

import pytest

from perfonto.outputs import output_folder


def _swallowing_library():
    """What a library does that catches BaseException around its work (a finalizer, a callback)."""
    try:
        os.kill(os.getpid(), signal.SIGINT)
        signal.sigtimedwait([], 0)  # let the handler run here, inside the try
    except BaseException:  # noqa: BLE001 - the point of the test
        pass


def test_a_swallowed_ctrl_c_leaves_no_output(tmp_path):
    out = tmp_path / "run"
    with pytest.raises(KeyboardInterrupt):
        with output_folder(out) as tmp:
            (tmp / "report.json").write_text("{}")
            _swallowing_library()
            (tmp / "more.txt").write_text("the run went on")
    assert not out.exists() and not list(tmp_path.glob(".run*"))
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # put back


def test_an_uninterrupted_run_is_committed(tmp_path):
    out = tmp_path / "run"
    with output_folder(out) as tmp:
        (tmp / "report.json").write_text("{}")
    assert (out / "report.json").read_text() == "{}"
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
