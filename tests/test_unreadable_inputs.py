"""Issue 57, files and directories: a path given as a profile that this user may not
read, list or reach, or that is no regular file, is refused as what it is (exit 2, one
line naming it, the problem and the fix) before its format is told from its name; what
is valid is answered. No permission check binds root, so the tests take the permission
away where roofline asks for it: the listing, ``stat`` and ``open`` calls of the paths
made unreadable raise PermissionError, as they do for a user without the right."""

import errno
import os
import shutil
from pathlib import Path

import pytest

from roofline.cli import main
from roofline.errors import TraceError
from roofline.input_files import PROFILE_INPUT, check_readable
from roofline.program.run import load_run
from tests.kineto import kineto_trace

GEMM_TRACE = Path(__file__).parent.parent / "traces" / "mi300x_jax08_gemm.xplane.pb"
NOT_LISTED = "cannot list the directory: permission denied; make it readable to you"
NOT_REACHED = "cannot reach it: permission denied on a directory above it; make that " \
              "directory searchable to you"
NOT_READ = "cannot read the file: permission denied; make it readable to you (chmod u+r"


@pytest.fixture
def deny(monkeypatch):
    """``deny(path)``: this process may no longer list ``path`` (a directory) nor reach
    what is below it, or (a file) open it, as a user without those rights."""
    directories: list[str] = []
    files: list[str] = []
    real = {name: getattr(os, name) for name in ("stat", "scandir", "listdir", "open")}

    def refuse(path):
        raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), path)

    def named(path) -> str | None:
        return None if isinstance(path, int) else os.path.abspath(os.fspath(path))

    def below(path) -> bool:
        name = named(path)
        return name is not None and any(name.startswith(d + os.sep) for d in directories)

    def stat(path, *args, **kwargs):
        if below(path):
            refuse(path)
        return real["stat"](path, *args, **kwargs)

    def listing(call):
        def listed(path=".", *args, **kwargs):
            if below(path) or named(path) in directories:
                refuse(path)
            return real[call](path, *args, **kwargs)
        return listed

    def open_(path, flags, *args, **kwargs):
        if below(path) or named(path) in files:
            refuse(path)
        return real["open"](path, flags, *args, **kwargs)

    monkeypatch.setattr(os, "stat", stat)
    monkeypatch.setattr(os, "scandir", listing("scandir"))
    monkeypatch.setattr(os, "listdir", listing("listdir"))
    monkeypatch.setattr(os, "open", open_)

    def deny_path(path: Path) -> Path:
        (directories if path.is_dir() else files).append(os.path.abspath(path))
        return path
    return deny_path


def _refused(argv, capsys):
    """The one line a command refuses ``argv`` with: exit 2, no traceback."""
    capsys.readouterr()
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("roofline: error: ") and "Traceback" not in err, err
    assert len(err.strip().splitlines()) == 1, err
    return err


def _directory_with_trace(tmp_path: Path) -> Path:
    directory = tmp_path / "locked"
    directory.mkdir()
    kineto_trace(directory / "step.pt.trace.json")
    return directory


def test_a_directory_it_may_not_list_is_refused_as_that(tmp_path, capsys, deny):
    # Was: PermissionError: [Errno 13] Permission denied: 'locked' (a traceback, exit 1).
    directory = deny(_directory_with_trace(tmp_path))
    err = _refused(["explain", str(directory), "--hardware", "h100-sxm"], capsys)
    assert err == f"roofline: error: {directory}: {NOT_LISTED} (chmod u+rx, or ask its " \
                  "owner), or give a copy you may read\n"
    for argv in (["explain", str(directory), "--device", "all"],
                 ["analyze", str(directory)]):
        assert NOT_LISTED in _refused(argv, capsys)


def test_a_file_under_a_directory_it_may_not_search_is_refused_as_that(tmp_path, capsys,
                                                                       deny):
    # Was: PermissionError: [Errno 13] Permission denied: 'locked/step.pt.trace.json'.
    directory = deny(_directory_with_trace(tmp_path))
    trace = directory / "step.pt.trace.json"
    err = _refused(["explain", str(trace), "--hardware", "h100-sxm"], capsys)
    assert err.startswith(f"roofline: error: {trace}: {NOT_REACHED} (chmod u+x"), err
    with pytest.raises(TraceError, match="permission denied on a directory above it"):
        load_run(trace)


@pytest.mark.parametrize("name", ["trace.json", "trace.json.gz", "report.sqlite",
                                  "report.nsys-rep", "report.csv", "h.xplane.pb", "profile"])
def test_a_file_it_may_not_read_is_said_so_whatever_its_name(tmp_path, capsys, deny, name):
    # Was: "cannot read the Nsight Systems report: Permission denied" for every name.
    path = tmp_path / name
    kineto_trace(path)
    deny(path)
    err = _refused(["explain", str(path), "--hardware", "h100-sxm"], capsys)
    assert err.startswith(f"roofline: error: {path}: {NOT_READ}"), err
    assert "Nsight" not in err and "xplane" not in err.replace(name, "")


def test_a_report_it_may_not_read_in_a_directory_is_named(tmp_path, capsys, deny):
    (tmp_path / "run").mkdir()
    report = deny(tmp_path / "run" / "kernels.csv")
    report.write_text('"ID","Kernel Name"\n')
    err = _refused(["explain", str(tmp_path / "run")], capsys)
    assert f"{report}: {NOT_READ}" in err


def test_directories_below_it_may_not_list_are_named_where_no_trace_is_found(tmp_path,
                                                                            capsys, deny):
    run = tmp_path / "run"
    (run / "plugins" / "profile" / "s").mkdir(parents=True)
    shutil.copy(GEMM_TRACE, run / "plugins" / "profile" / "s" / "h.xplane.pb")
    deny(run / "plugins")
    err = _refused(["explain", str(run)], capsys)
    assert err == (f"roofline: error: {run}: no *.xplane.pb trace below this directory, and 1 "
                   f"directories below it may not be listed ({run / 'plugins'}); make them "
                   "readable to you (chmod u+rx) if the trace is there, or capture one with "
                   "'roofline profile' or jax.profiler.trace\n")


NSIGHT_COMPUTE_FIX = "give the CSV that 'ncu --csv --page raw'"
NSYS_FIX = "give the SQLite export of the report: nsys export --type sqlite"


@pytest.mark.parametrize("name, fix", [
    ("kernels.csv", NSIGHT_COMPUTE_FIX), ("kernels.CSV", NSIGHT_COMPUTE_FIX),
    ("report.sqlite", NSYS_FIX), ("report.sqlite3", NSYS_FIX), ("report.nsys-rep", NSYS_FIX),
    ("trace.json.gz", "give the *.json or *.json.gz written by torch.profiler"),
    ("h.xplane.pb", "give a *.xplane.pb written by jax.profiler"),
    ("profile", "give a run directory, a trace (.xplane.pb, or a PyTorch profiler's"),
])
def test_a_fifo_named_as_a_report_is_refused_as_no_regular_file(tmp_path, capsys, name, fix):
    # Was, for kernels.csv and report.sqlite: "it is a FIFO, not a regular file: give a
    # *.xplane.pb written by jax.profiler, or the directory of a run".
    fifo = tmp_path / name
    os.mkfifo(fifo)
    err = _refused(["explain", str(fifo)], capsys)
    assert err.startswith(f"roofline: error: {fifo}: it is a FIFO, not a regular file: {fix}")
    if "xplane" not in name and name != "profile":
        assert "xplane" not in err


def test_a_refused_run_changes_nothing_on_disk(tmp_path, capsys, deny):
    directory = deny(_directory_with_trace(tmp_path))
    plot = tmp_path / "old.png"
    plot.write_bytes(b"an earlier plot")
    before = sorted((p, p.stat().st_mtime_ns) for p in tmp_path.rglob("*")
                    if p != directory and directory not in p.parents)
    _refused(["explain", str(directory), "--hardware", "h100-sxm", "--plot", str(plot),
              "--html", str(tmp_path / "new.html")], capsys)
    after = sorted((p, p.stat().st_mtime_ns) for p in tmp_path.rglob("*")
                   if p != directory and directory not in p.parents)
    assert after == before and plot.read_bytes() == b"an earlier plot"


def test_what_may_be_read_is_read(tmp_path, deny):
    # The checks refuse only what is denied: the trace beside a denied file is read, and a
    # path where nothing is reads as nothing there, for its reader to say.
    trace = kineto_trace(tmp_path / "step.pt.trace.json")
    deny(kineto_trace(tmp_path / "other.json"))
    assert load_run(tmp_path / "step.pt.trace.json").run.steps == 2
    assert check_readable(trace, PROFILE_INPUT) and check_readable(tmp_path, PROFILE_INPUT)
    assert not check_readable(tmp_path / "missing.json", PROFILE_INPUT)
    assert not check_readable("fc:layers=\0", PROFILE_INPUT)
