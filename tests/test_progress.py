"""Progress of long work: shown on a terminal's standard error, silent otherwise and with
--quiet, never on standard output."""

import io
import sys

from roofline import progress
from roofline.cli import main


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def _terminal(monkeypatch) -> _Terminal:
    # Set inside the test: pytest's own capture re-installs sys.stderr after fixtures.
    stream = _Terminal()
    monkeypatch.setattr(sys, "stderr", stream)
    progress.set_quiet(False)
    return stream


def test_bars_and_waits_show_on_a_terminal_only(monkeypatch):
    terminal = _terminal(monkeypatch)
    tracker = progress.bar(3, "sweep", unit="task")
    tracker.update(3)
    tracker.close()
    with progress.waiting("compiling for tpu-v3"):
        pass
    progress.say("round 1/2")
    shown = terminal.getvalue()
    assert "sweep:   0%" in shown and "| 0/3" in shown and "compiling for tpu-v3" in shown
    assert "round 1/2" in shown
    progress.set_quiet(True)
    assert not progress.shown()
    monkeypatch.setattr(sys, "stderr", io.StringIO())   # not a terminal
    progress.set_quiet(False)
    assert not progress.shown()


def test_a_compile_shows_its_elapsed_time_unless_quiet(monkeypatch, capsys):
    terminal = _terminal(monkeypatch)
    spec = "matmul:m=64,n=64,k=64,dtype=f32"
    assert main(["analyze", spec, "--target", "tpu-v3", "--hardware", "tpu-v3"]) == 0
    assert "compiling for tpu-v3" in terminal.getvalue()
    assert "compiling" not in capsys.readouterr().out      # stdout holds only the answer
    terminal.seek(0)
    terminal.truncate()
    assert main(["--quiet", "analyze", spec, "--target", "tpu-v3", "--hardware",
                 "tpu-v3"]) == 0
    assert "compiling" not in terminal.getvalue()
    assert main(["analyze", spec, "--target", "tpu-v3", "--hardware", "tpu-v3",
                 "--quiet"]) == 0
    assert "compiling" not in terminal.getvalue()
