"""Nsight Systems SQLite exports read into kernel tables: per GPU, per stream, with copies
and NVTX steps (the export is written by tests/nsys.py from NVIDIA's documented schema)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from roofline.cli import main
from roofline.program.trace.nsight_systems import read_nsys, read_nsys_devices
from tests.nsys import ALLREDUCE, GELU, GEMM, nsys_export

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
