"""Outputs only ever create or replace regular files (roofline/outputs.py), and a bad
output path is refused before any work, with exit 2 and the path named."""

import os
import socket

import pytest

from roofline.cli import main
from roofline.errors import RooflineError
from roofline.outputs import write_text_atomic

SPEC = "matmul:m=8,n=8,k=8,dtype=f32"


def _fifo(tmp_path):
    path = tmp_path / "fifo"
    os.mkfifo(path)
    return path


def _symlink(tmp_path):
    target = tmp_path / "target.txt"
    target.write_text("kept")
    (tmp_path / "link").symlink_to(target)
    return tmp_path / "link"


def _socket(tmp_path):
    path = tmp_path / "sock"
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(path))
    server.close()
    return path


def _under_a_file(tmp_path):
    (tmp_path / "plain").write_text("kept")
    return tmp_path / "plain" / "out.json"


BAD_OUTPUTS = [
    ("character device", lambda tmp: "/dev/full", "it is a character device"),
    ("directory", lambda tmp: tmp, "it is a directory"),
    ("symbolic link", _symlink, "it is a symbolic link"),
    ("FIFO", _fifo, "it is a FIFO"),
    ("socket", _socket, "it is a socket"),
    ("under a file", _under_a_file, "is a file, not a directory"),
    ("missing directory", lambda tmp: tmp / "no" / "out.json", "does not exist"),
]


@pytest.mark.parametrize("make, message", [case[1:] for case in BAD_OUTPUTS],
                         ids=[case[0] for case in BAD_OUTPUTS])
def test_a_bad_output_path_is_refused_and_left_alone(tmp_path, capsys, make, message):
    path = make(tmp_path)
    before = os.lstat(path) if os.path.lexists(path) else None
    assert main(["analyze", SPEC, "--out", str(path)]) == 2
    err = capsys.readouterr().err
    assert message in err and str(path) in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1
    if before is not None:    # the same kind of thing, untouched
        after = os.lstat(path)
        assert (after.st_mode, after.st_ino) == (before.st_mode, before.st_ino)
    assert not list(tmp_path.glob("**/.*.tmp"))


def test_plot_and_annotate_paths_are_checked_before_any_work(tmp_path, capsys):
    assert main(["analyze", SPEC, "--plot", str(tmp_path)]) == 2
    assert "it is a directory" in capsys.readouterr().err
    assert main(["explain", "traces/mi300x_jax08_conv.xplane.pb",
                 "--annotate", "/dev/null"]) == 2
    assert "character device" in capsys.readouterr().err


def test_a_regular_file_is_replaced_whole(tmp_path):
    path = tmp_path / "out.txt"
    path.write_text("old")
    write_text_atomic(path, "new")
    assert path.read_text() == "new" and not list(tmp_path.glob(".*.tmp"))


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only directories")
def test_a_read_only_directory_is_refused(tmp_path):
    directory = tmp_path / "ro"
    directory.mkdir(mode=0o500)
    with pytest.raises(RooflineError, match="not writable"):
        write_text_atomic(directory / "out.txt", "x")


def test_a_run_that_appears_meanwhile_is_not_overwritten(tmp_path):
    # Two `profile --out run` at once: the first to finish keeps `run`; the second,
    # finding it there when it moves its own staging directory, refuses and keeps nothing.
    from roofline.program.trace.capture import _keep

    staging = tmp_path / ".run.partial-2"
    staging.mkdir()
    (staging / "manifest.json").write_text('{"second": true}')
    out = tmp_path / "run"
    out.mkdir()
    (out / "manifest.json").write_text('{"first": true}')
    with pytest.raises(RooflineError, match="appeared while this run was being captured"):
        _keep(staging, out)
    assert (out / "manifest.json").read_text() == '{"first": true}'
