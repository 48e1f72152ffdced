"""A Ctrl-C that a library swallows still stops the run: ``output_folder`` remembers SIGINT (as it does
SIGTERM) and never commits an interrupted run's output, whoever caught the KeyboardInterrupt in between
(a finalizer, a callback, a library catching BaseException)."""

import os
import signal

import pytest

from perfonto.outputs import output_folder


@pytest.fixture
def ctrl_c():
    """SIGINT raising KeyboardInterrupt, as in a terminal, for the test (a test process started in the
    background or by an xdist worker may have SIGINT ignored); the process's own handler back after."""
    old = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, old)


def _swallowing_library():
    """What a library does that catches BaseException around its work."""
    try:
        os.kill(os.getpid(), signal.SIGINT)
        signal.sigtimedwait([], 0)  # let the handler run here, inside the try
    except BaseException:  # noqa: BLE001 - the point of the test
        pass


def test_a_swallowed_ctrl_c_leaves_no_output(tmp_path, ctrl_c):
    out = tmp_path / "run"
    with pytest.raises(KeyboardInterrupt):
        with output_folder(out) as tmp:
            (tmp / "report.json").write_text("{}")
            _swallowing_library()
            (tmp / "more.txt").write_text("the run went on")
    assert not out.exists() and not list(tmp_path.glob(".run*"))
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # put back


def test_an_uninterrupted_run_is_committed(tmp_path, ctrl_c):
    out = tmp_path / "run"
    with output_folder(out) as tmp:
        (tmp / "report.json").write_text("{}")
    assert (out / "report.json").read_text() == "{}"
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_ctrl_c_ignored_by_the_parent_stays_ignored(tmp_path):
    """A process started with SIGINT ignored (nohup, a background job) keeps it ignored: perfonto does not
    install its handler over SIG_IGN."""
    old = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        with output_folder(tmp_path / "run") as tmp:
            assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
            (tmp / "report.json").write_text("{}")
        assert (tmp_path / "run" / "report.json").exists()
    finally:
        signal.signal(signal.SIGINT, old)
