"""Nsight Systems SQLite exports read into kernel tables: per GPU, per stream, with copies
and NVTX steps (the export is written by tests/nsys.py from NVIDIA's documented schema)."""

from __future__ import annotations

import json
import sqlite3
import time
from pathlib import Path

import pytest

from roofline.cli import main
from roofline.program.trace.nsight_systems import read_nsys, read_nsys_devices
from tests.nsys import ALLREDUCE, GELU, GEMM, nsys_export
from tests.refusals import refused

US = 1e-6


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    return nsys_export(tmp_path_factory.mktemp("nsys") / "nsys_two_gpus.sqlite")


def _rows(run):
    return {row.name: row for row in run.rows}


def test_each_gpu_gets_its_kernels_and_copies_by_name(report):
    runs = read_nsys_devices(report)
    # Both processes see their GPU as CUDA device 0; TARGET_INFO_CUDA_DEVICE says process
    # 100's is GPU 1 and process 200's GPU 0, so they stay apart.
    assert list(runs) == [0, 1]
    assert runs[1].device == "GPU 1: NVIDIA H100 80GB HBM3"
    gpu1 = _rows(runs[1])
    # GPU 1, 3 steps: the GEMM twice a step at 100 us: 6 launches, 600 us (200 us a step);
    # the all-reduce 3 x 50 us; GELU 3 x 20 us.
    assert (gpu1[GEMM].launches, gpu1[GEMM].total_s) == (6, pytest.approx(600 * US))
    assert gpu1[GEMM].category == "matmul" and gpu1[GEMM].bytes is None
    assert (gpu1[ALLREDUCE].total_s, gpu1[ALLREDUCE].category) == (
        pytest.approx(150 * US), "collective")
    assert gpu1[GELU].total_s == pytest.approx(60 * US)
    # Copies join the table, named by their kind: 3 host-to-device copies of 4,000,000
    # bytes in 100 us each (12 MB in 300 us: 40 GB/s); 3 memsets of 1 MB in 2 us each.
    htod = gpu1["memcpy HtoD"]
    assert (htod.category, htod.launches, htod.bytes) == ("copy", 3, 12_000_000)
    assert htod.bytes / htod.total_s == pytest.approx(40e9)
    assert gpu1["memset"].bytes / gpu1["memset"].total_s == pytest.approx(500e9)
    # GPU 0: the GEMM once a step (3 x 100 us) and a device-to-host copy of 2 MB in 100 us
    # (6 MB in 300 us: 20 GB/s).
    gpu0 = _rows(runs[0])
    assert (gpu0[GEMM].launches, gpu0[GEMM].total_s) == (3, pytest.approx(300 * US))
    assert gpu0["memcpy DtoH"].bytes / gpu0["memcpy DtoH"].total_s == pytest.approx(20e9)
    assert "memcpy HtoD" not in gpu0


def test_each_stream_has_its_kernels_launches_and_busy_time(report):
    streams = {s.stream: s for s in read_nsys_devices(report)[1].streams}
    # GPU 1, stream 7 per step: 2 GEMMs (200 us), GELU (20 us), a memset (2 us): 2 kernel
    # names, 9 launches and 3 copies in 3 steps, busy 3 x 222 = 666 us.
    assert (streams[7].kernels, streams[7].launches, streams[7].copies) == (2, 9, 3)
    assert streams[7].busy_s == pytest.approx(666 * US)
    # stream 13: the all-reduce, 3 x 50 us; stream 14: the copies only, 3 x 100 us.
    assert (streams[13].kernels, streams[13].launches, streams[13].busy_s) == (
        1, 3, pytest.approx(150 * US))
    assert (streams[14].kernels, streams[14].copies, streams[14].busy_s) == (
        0, 3, pytest.approx(300 * US))


def test_steps_are_the_nvtx_ranges_named_as_steps(report):
    run = read_nsys(report, 0)
    # 3 train_step ranges on each process's thread; the one 'warmup step 0' range names
    # a step too but has fewer ranges; the 6 'forward' ranges a thread name none.
    assert run.steps == 3
    assert run.steps_from == "NVTX ranges 'train_step' (3 on one thread)"
    assert run.notes == ("NVTX step ranges not used: 'warmup step N'",)


def test_the_default_gpu_is_the_one_with_the_most_kernel_time(report):
    run = read_nsys(report)
    # GPU 1: (200 + 50 + 20) us a step x 3 = 810 us of kernels; GPU 0: (100 + 20) x 3 =
    # 360 us. Copies are left out of the choice.
    assert run.device.startswith("GPU 1")
    assert run.notes[0].startswith("GPU 1 shown: the GPU with the most kernel time of 2 "
                                   "(GPU 0 360 us, GPU 1 810 us; copies apart)")


def test_of_gpus_with_as_much_kernel_time_the_one_marked_busiest_is_shown(tmp_path, capsys):
    # GPU 0's GELU made 170 us: 270 us of kernels a step on each GPU. GPU 1 copies 102 us a
    # step, GPU 0 100 us: GPU 1 is shown by default and is the one --device all marks
    # busiest (the one rule, roofline.program.trace.devices).
    path = nsys_export(tmp_path / "tie.sqlite")
    with sqlite3.connect(path) as db:
        db.execute('UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET "end" = start + 170000 '
                   "WHERE demangledName = 2 AND globalPid >> 24 = 200")
    runs = read_nsys_devices(path)
    assert runs[0].kernel_s == pytest.approx(runs[1].kernel_s)
    assert read_nsys(path).device.startswith("GPU 1")
    assert main(["explain", str(path), "--device", "all", "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["busiest"].startswith("GPU 1")


def test_an_export_before_text_ids_and_cuda_device_maps_is_read(tmp_path):
    run = read_nsys(nsys_export(tmp_path / "nsys_old.sqlite", old_schema=True))
    # NVTX names in text: the same 3 steps. Without TARGET_INFO_CUDA_DEVICE both processes'
    # CUDA device 0 is one device: the GEMM 3 + 6 = 9 launches, and a note says so.
    assert run.steps == 3
    assert run.device == "GPU 0: NVIDIA H100 80GB HBM3"
    assert _rows(run)[GEMM].launches == 9
    assert any("work of 2 processes (100, 200)" in note for note in run.notes)


def test_a_report_without_step_ranges_is_one_step_and_lists_its_ranges(tmp_path):
    path = nsys_export(tmp_path / "nsys_no_steps.sqlite")
    with sqlite3.connect(path) as db:
        db.execute("DELETE FROM NVTX_EVENTS WHERE textId = 4 OR text LIKE 'warmup%'")
    run = read_nsys(path, 1)
    assert (run.steps, run.steps_from) == (1, "")
    assert run.notes == ("no NVTX range names a step (a name with 'step' or 'iteration'); "
                         "its ranges: 'forward' x12",)
    assert _rows(run)[GEMM].total_s == pytest.approx(600 * US)   # the whole report


def test_the_cli_explains_a_report_per_device_and_per_stream(report, capsys):
    assert main(["explain", str(report)]) == 0
    out = capsys.readouterr().out
    assert "(GPU 1: NVIDIA H100 80GB HBM3): kernels without XLA ops; 3 steps from NVTX " \
           "ranges 'train_step'" in out
    assert "GPU 1 shown: the GPU with the most kernel time" in out
    assert "40 GB/s" in out and "streams: busy" in out
    assert main(["explain", str(report), "--device", "0", "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["device"] == "GPU 0: NVIDIA H100 80GB HBM3" and doc["steps"] == 3
    assert doc["copies"][0]["bytes_per_s"] == pytest.approx(20e9)
    assert doc["streams"] == [{"stream": 7, "kernels": 2, "launches": 6, "copies": 3,
                               "busy_s": pytest.approx(660 * US),
                               "busy_s_per_step": pytest.approx(220 * US)}]
    assert main(["explain", str(report), "--device", "all", "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert [d["device"][:5] for d in doc["devices"]] == ["GPU 0", "GPU 1"]
    assert main(["explain", str(report), "--device", "3"]) == 2
    assert "no GPU 3 in this report; its GPUs are 0, 1" in capsys.readouterr().err


def test_the_docs_show_what_the_command_prints(tmp_path, monkeypatch, capsys):
    page = (Path(__file__).parent.parent / "docs" / "explain.md").read_text()
    section = page.split("## Nsight Systems reports")[1].split("\n## ")[0]
    excerpt = section.split("```")[3].strip("\n").splitlines()
    monkeypatch.chdir(tmp_path)
    nsys_export(Path("report.sqlite"))
    assert main(["explain", "report.sqlite"]) == 0
    printed = {line.rstrip() for line in capsys.readouterr().out.splitlines()}
    assert [line for line in excerpt if line != "..." and line.rstrip() not in printed] == []


def test_an_sqlite_file_is_told_by_its_header_not_its_name(report, tmp_path, capsys):
    renamed = tmp_path / "profile.out"
    renamed.write_bytes(report.read_bytes())
    assert main(["explain", str(renamed), "--device", "1", "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["device"].startswith("GPU 1")


def _other_schema(path):
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE users (id INTEGER, name TEXT)")
    return path


def _truncated(path):
    data = nsys_export(path).read_bytes()
    path.write_bytes(data[:len(data) // 2])
    return path


def _no_device_column(path):
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (start INT, end INT, "
                   "streamId INT, demangledName INT)")
    return path


def _negative_kernel(path):
    nsys_export(path)
    with sqlite3.connect(path) as db:
        db.execute('UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET "end" = start - 5 '
                   "WHERE rowid = 1")
    return path


def _written(content):
    def write(path):
        path.write_bytes(content)
        return path
    return write


@pytest.mark.parametrize("name, make, message", [
    ("other.sqlite", _other_schema, "no CUPTI_ACTIVITY_KIND_KERNEL table, so no kernels: "
     "this is no Nsight Systems export of a CUDA run (its tables: users). Expected "
     "CUPTI_ACTIVITY_KIND_KERNEL"),
    ("run.nsys-rep", _written(b"\x00NSYS report"), "an Nsight Systems report is read from "
     "its SQLite export: run 'nsys export --type sqlite --output REPORT.sqlite "
     "REPORT.nsys-rep'"),
    ("run.qdrep", _written(b"old report"), "nsys export --type sqlite"),
    ("cut.sqlite", _truncated, "the SQLite file is truncated (its header says"),
    ("notes.sqlite", _written(b"kernel,time\ngemm,1\n"), "not an SQLite database"),
    ("empty.sqlite", _written(b""), "not an SQLite database"),
    ("columns.sqlite", _no_device_column, "table CUPTI_ACTIVITY_KIND_KERNEL has no column "
     "deviceId"),
    ("negative.sqlite", _negative_kernel, "lasts -5e-09 s (negative or over"),
])
def test_what_is_no_nsight_systems_export_is_refused(tmp_path, capsys, name, make, message):
    path = make(tmp_path / name)
    assert main(["explain", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"roofline: error: {path}: ")
    assert message in err
    assert "Traceback" not in err


# --- Issue 57: what nsys writes in each column read, checked; a locked export ------------

EXPORT_AGAIN = "export it again with 'nsys export --type sqlite --output REPORT.sqlite"


def _edited(path, *statements, loosen=None):
    """The test export with ``statements`` run on it; ``loosen`` a table recreated without
    its NOT NULL constraints first (nsys declares them; an edited file may lack them)."""
    nsys_export(path)
    with sqlite3.connect(path) as db:
        if loosen:
            db.executescript(f"CREATE TABLE loose AS SELECT * FROM {loosen}; DROP TABLE "
                             f"{loosen}; ALTER TABLE loose RENAME TO {loosen};")
        for statement in statements:
            db.execute(statement)
    return path


KERNEL_TABLE = "CUPTI_ACTIVITY_KIND_KERNEL"


@pytest.mark.parametrize("statements, loosen, message", [
    # Before: the row left out of the sums but counted a launch: GPU 1's step 338.7 us,
    # not 372 (a GEMM's 100 us lost over 3 steps).
    (['UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET "end" = NULL WHERE rowid = 1'], KERNEL_TABLE,
     "CUPTI_ACTIVITY_KIND_KERNEL row 1: end holds no value (NULL), where nsys writes a "
     "whole number of nanoseconds"),
    # Before: the text read as 0 by SQLite's arithmetic: the GEMM 536.7 us a step, not 200.
    (["UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET start = 'x' || start WHERE rowid = 1"], None,
     "CUPTI_ACTIVITY_KIND_KERNEL row 1: start holds the text 'x1010000', where nsys writes "
     "a whole number of nanoseconds"),
    (["UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET streamId = 'seven' WHERE rowid = 4"], None,
     "CUPTI_ACTIVITY_KIND_KERNEL row 4: streamId holds the text 'seven', where nsys writes "
     "a whole number"),
    (["UPDATE CUPTI_ACTIVITY_KIND_MEMCPY SET bytes = 1.5 WHERE rowid = 2"], None,
     "CUPTI_ACTIVITY_KIND_MEMCPY row 2: bytes holds the fraction 1.5, where nsys writes a "
     "whole number"),
    (["UPDATE NVTX_EVENTS SET start = 'abc' WHERE rowid = 2"], None,
     "NVTX_EVENTS row 2: start holds the text 'abc', where nsys writes a whole number of "
     "nanoseconds"),
    # Before: every kernel named by its id ("1", classed "other"), and the steps counted
    # from the one range with a text name, 'warmup step 0': 1 step, not 3.
    (["DROP TABLE StringIds"], None,
     "CUPTI_ACTIVITY_KIND_KERNEL.demangledName names kernels by ids into StringIds, and "
     "the export has no StringIds table: no kernel would have its name or class"),
    (["UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET demangledName = (SELECT value FROM StringIds "
      "WHERE id = demangledName)", "DROP TABLE StringIds"], None,
     "NVTX_EVENTS names ranges by ids into StringIds (textId, row 1 the first), and the "
     "export has no StringIds table"),
    (["UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET demangledName = 77 WHERE rowid = 3"], None,
     "CUPTI_ACTIVITY_KIND_KERNEL.demangledName holds ids that StringIds lacks: 77 (row 3 "
     "holds 77)"),
    (["UPDATE NVTX_EVENTS SET textId = 99 WHERE rowid = 1"], None,
     "NVTX_EVENTS row 1: textId 99 is no id of StringIds: the range would go unnamed"),
])
def test_a_column_nsys_never_writes_so_is_refused_by_table_row_and_column(
        tmp_path, capsys, statements, loosen, message):
    path = _edited(tmp_path / "edited.sqlite", *statements, loosen=loosen)
    err = refused(["explain", str(path)], capsys)
    assert f"{path}: {message}" in err and EXPORT_AGAIN in err


def test_a_range_still_open_when_the_capture_stopped_is_read(tmp_path):
    # An NVTX range without its end (NULL) is what nsys writes for one never closed: left
    # out of the steps, not refused.
    path = _edited(tmp_path / "open.sqlite", 'UPDATE NVTX_EVENTS SET "end" = NULL WHERE '
                   "rowid = 2")
    assert read_nsys(path, 1).steps == 3


def test_a_locked_export_is_refused_at_once(report, tmp_path, capsys):
    # Before: sqlite3's default timeout, 5 s, then "not a readable SQLite database
    # (database is locked): export it again". A lock that stops a reader is held by a
    # process writing the file: refused at once, saying so.
    path = tmp_path / "locked.sqlite"
    path.write_bytes(report.read_bytes())
    writer = sqlite3.connect(path, isolation_level=None)
    try:
        writer.execute("BEGIN EXCLUSIVE")
        started = time.perf_counter()
        err = refused(["explain", str(path)], capsys)
        assert time.perf_counter() - started < 2.5
        assert (f"{path}: the SQLite database is locked by another process writing it "
                "(database is locked): an 'nsys export' not finished, or a program holding "
                "it open to write; run again once that has ended") in err
        writer.execute("ROLLBACK")
        # A writer that has begun but not yet commits holds no lock a reader waits on.
        writer.execute("BEGIN IMMEDIATE")
        writer.execute("UPDATE StringIds SET value = value WHERE id = 1")
        assert read_nsys(path, 1).steps == 3
        writer.execute("ROLLBACK")
    finally:
        writer.close()
    assert read_nsys(path, 1).steps == 3
