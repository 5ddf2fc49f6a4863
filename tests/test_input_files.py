"""The one reader of input files (roofline/input_files.py): regular files only, within
their kind's size limit. The command-line cases are in test_bad_input.py."""

import dataclasses
import gzip
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from roofline.errors import SpecError, TraceError
from roofline.input_files import (
    KINETO_TRACE,
    SPEC_FILE,
    XPLANE_TRACE,
    check_input,
    gunzipped,
    read_input,
    read_input_text,
    read_optional_input,
)

TINY = dataclasses.replace(SPEC_FILE, max_bytes=8)


def test_a_file_up_to_the_limit_is_read_and_one_byte_more_refused(tmp_path):
    path = tmp_path / "a.toml"
    path.write_bytes(b"12345678")
    assert read_input(path, TINY) == b"12345678"
    path.write_bytes(b"123456789")
    with pytest.raises(SpecError, match="larger than 8 bytes \\(the spec file limit\\)"):
        read_input(path, TINY)


def test_a_link_to_a_file_is_read_and_a_link_to_nothing_is_no_file(tmp_path):
    (tmp_path / "real.toml").write_text("x = 1\n")
    (tmp_path / "link.toml").symlink_to(tmp_path / "real.toml")
    (tmp_path / "dangling.toml").symlink_to(tmp_path / "gone.toml")
    assert read_input_text(tmp_path / "link.toml", SPEC_FILE) == "x = 1\n"
    assert read_optional_input(tmp_path / "dangling.toml", SPEC_FILE) is None
    with pytest.raises(SpecError, match="dangling.toml: no such file: give the path"):
        read_input(tmp_path / "dangling.toml", SPEC_FILE)


def test_a_path_under_a_file_is_no_file(tmp_path):
    (tmp_path / "plain").write_text("")
    assert read_optional_input(tmp_path / "plain" / "x.json", XPLANE_TRACE) is None
    with pytest.raises(TraceError, match="no such file"):
        check_input(tmp_path / "plain" / "x.json", XPLANE_TRACE)


@pytest.mark.parametrize("make, what", [
    (lambda tmp: tmp, "a directory"),
    (lambda tmp: Path("/dev/null"), "a character device"),
], ids=["directory", "device"])
def test_check_input_names_what_the_path_is(tmp_path, make, what):
    with pytest.raises(TraceError, match=f"it is {what}, not a regular file: give a"):
        check_input(make(tmp_path), XPLANE_TRACE)


def test_a_small_gzip_that_inflates_past_the_limit_is_refused(tmp_path):
    # 1 MiB of zeros compress to about 1 KiB; the limit is on what comes out.
    bomb = gzip.compress(bytes(1 << 20))
    kind = dataclasses.replace(KINETO_TRACE, max_bytes=1 << 19)
    assert len(bomb) < kind.max_bytes
    with pytest.raises(TraceError, match="larger uncompressed than 512 KiB"):
        gunzipped(bomb, tmp_path / "t.json.gz", kind)
    assert gunzipped(gzip.compress(b"{}"), tmp_path / "t.json.gz", kind) == b"{}"
    with pytest.raises(TraceError, match="not a readable gzip file"):
        gunzipped(b"not gzip", tmp_path / "t.json.gz", kind)


def test_a_fifo_put_in_place_after_the_check_does_not_block(tmp_path):
    # The race: the path was a regular file when checked, a FIFO with no writer when
    # opened. The open must not wait for a writer, and the opened file is checked again.
    # In a process of its own, so that a blocking open fails on the timeout.
    script = textwrap.dedent(f"""
        import os
        import roofline.input_files as files
        from roofline.errors import RooflineError
        os.mkfifo({str(tmp_path / "f.toml")!r})
        files._checked_stat = lambda path, kind: os.stat(__file__)   # passes as regular
        try:
            files.read_input({str(tmp_path / "f.toml")!r}, files.SPEC_FILE)
        except RooflineError as exc:
            print(exc)
        """)
    (tmp_path / "race.py").write_text(script)
    done = subprocess.run([sys.executable, str(tmp_path / "race.py")], capture_output=True,
                          text=True, timeout=120, cwd=Path(__file__).parent.parent)
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"{tmp_path}/f.toml: it is a FIFO, not a regular file: give the " \
                          "path of a .toml spec file (a few KiB of TOML)\n"

