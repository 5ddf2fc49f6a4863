"""Progress of long work: shown on a terminal's standard error, silent otherwise and with
--quiet, never on standard output."""

import io
import os
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


def test_a_compile_expects_what_the_machines_recent_compiles_give_for_its_size(tmp_path):
    from roofline.program.compile_times import (
        CompileTime,
        compiling_description,
        expected_seconds,
        record,
    )

    assert expected_seconds(tmp_path, "h200", 500) is None     # nothing compiled yet
    record(tmp_path, CompileTime("h200", 100, 2.0))
    assert expected_seconds(tmp_path, "h200", 500) == 10.0      # 0.02 s an operation
    record(tmp_path, CompileTime("h200", 300, 4.0))
    # the line through (100, 2 s) and (300, 4 s): 1 s to start, 0.01 s an operation
    assert abs(expected_seconds(tmp_path, "h200", 500) - 6.0) < 1e-9
    assert expected_seconds(tmp_path, "tpu-v3", 500) is None    # per target
    assert compiling_description("h200", 6.0) == "compiling for h200, about 6 s expected here:"
    assert compiling_description("h200", 0.4) == "compiling for h200"
    assert compiling_description("h200", 300.0).endswith("about 5.0 min expected here:")
    (tmp_path / "compile-times.json").write_text("{not json")
    assert expected_seconds(tmp_path, "h200", 500) is None      # a guide: started afresh
    # A FIFO in its place is never opened to block (a CI run hung on one), and the next
    # compile's history replaces it with a file.
    (tmp_path / "compile-times.json").unlink()
    os.mkfifo(tmp_path / "compile-times.json")
    assert expected_seconds(tmp_path, "h200", 500) is None
    record(tmp_path, CompileTime("h200", 100, 2.0))
    assert expected_seconds(tmp_path, "h200", 500) == 10.0


def test_a_compile_keeps_its_time_and_the_next_one_shows_its_estimate(monkeypatch, tmp_path):
    import json

    from roofline.program.compile_times import HISTORY_FILE

    monkeypatch.setenv("ROOFLINE_CACHE_DIR", str(tmp_path))
    terminal = _terminal(monkeypatch)
    assert main(["analyze", "matmul:m=64,n=64,k=64,dtype=f32", "--hardware", "tpu-v3"]) == 0
    (kept,) = json.loads((tmp_path / HISTORY_FILE).read_text())
    assert kept["target"] == "tpu-v3" and kept["operations"] > 0 and kept["seconds"] > 0
    # a machine whose compiles took 10 s an operation expects a long one, and says so
    (tmp_path / HISTORY_FILE).write_text(json.dumps([{**kept, "seconds": 10.0 * kept[
        "operations"]}]))
    assert main(["analyze", "matmul:m=64,n=32,k=64,dtype=f32", "--hardware", "tpu-v3"]) == 0
    assert "compiling for tpu-v3, about" in terminal.getvalue()
    assert len(json.loads((tmp_path / HISTORY_FILE).read_text())) == 2
