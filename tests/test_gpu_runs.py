"""Filing a GPU's ground-truth run (roofline.hardware.gpu_runs, ``roofline hardware
file-run``): each run in a folder of its own, a second filing refused unless replaced, and
every damaged input refused naming file and field with nothing written. The runs are
small copies of the committed H200 run (two of its steps, one profile)."""

from __future__ import annotations

import csv
import gzip
import io
import json
import pathlib
import shutil
import tarfile
from pathlib import Path

import pytest

from roofline.cli import main
from roofline.errors import GpuRunError, RooflineError
from roofline.hardware import gpu_runs
from roofline.hardware.gpu_runs import file_run, filed_gpu, filed_runs, tar_archive
from roofline.hardware.library import builtin_dir
from roofline.hardware.spec_file import load_spec_file
from tests.conftest import H200_RUN

STEPS = ("vgg16__batch-32_image-224_classes-1000_mode-train_dtype-bf16.txt.gz",
         "lstm_lm__batch-20_sequence-20_mode-train_dtype-f32.txt.gz")
PROFILED = STEPS[0].removesuffix(".txt.gz")
DAY = "2026-11-28"


def _members(path: Path) -> dict[str, bytes]:
    with tarfile.open(path) as tar:
        return {m.name: tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()}


@pytest.fixture(scope="module")
def source_run(tmp_path_factory) -> Path:
    """A run as the device machine gives it back: its records, logs, measurement and ops
    as committed; two of its steps with their dumps packed; one step's profile packed
    without its program (steps/NAME/: the FC step's run directory) and the PyTorch trace."""
    out = tmp_path_factory.mktemp("source")
    for name in ("provenance.json", "provenance-counters.json", "provenance-traces.json",
                 "log.txt", "measure.json", "ops.csv"):
        shutil.copyfile(H200_RUN / name, out / name)
    with (H200_RUN / "steps.csv").open(newline="") as handle:
        reader = csv.DictReader(handle)
        rows = [row for row in reader if row["dump"] in STEPS]
        columns = reader.fieldnames
    with (out / "steps.csv").open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=columns)
        writer.writeheader()
        writer.writerows(rows)
    (out / "dumps.tar.gz").write_bytes(tar_archive(
        {name: (H200_RUN / "dumps" / name).read_bytes() for name in STEPS}))
    committed = _members(H200_RUN / "traces.tar.gz")
    profile = {f"steps/{PROFILED}/{name.removeprefix('run0/')}": data
               for name, data in committed.items()
               if name.startswith("run0/") and not name.startswith("run0/hlo/")}
    (out / "traces.tar.gz").write_bytes(tar_archive(
        {**profile, "torch/cnn.pt.trace.json.gz": committed["torch/cnn.pt.trace.json.gz"]}))
    return out


@pytest.fixture
def place(tmp_path) -> tuple[Path, Path]:
    """Where runs are filed (nothing there yet), and a copy of the library's H200 spec that
    the filing writes into."""
    specs = tmp_path / "specs"
    specs.mkdir()
    shutil.copyfile(builtin_dir() / "h200.toml", specs / "h200.toml")
    return tmp_path / "measurements", specs


def _copy(source: Path, into: Path) -> Path:
    shutil.copytree(source, into)
    return into


def _tree(root: Path) -> dict[str, bytes]:
    """Every file under ``root`` (hidden ones too), by relative path."""
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file()}


def _with_record(run: Path, **fields) -> Path:
    record = json.loads((run / "provenance.json").read_text())
    (run / "provenance.json").write_text(json.dumps({**record, **fields}, indent=1))
    return run


def test_a_run_is_filed_in_a_folder_of_its_date_with_its_programs_given_back(
        source_run, place):
    measurements, specs = place
    filed = file_run(source_run, measurements, spec_dir=specs)
    assert filed.path == measurements / "h200" / DAY and not filed.replaced
    assert filed_runs(measurements / "h200") == [filed.path]
    assert filed_gpu(filed.path) == "h200"
    assert sorted(p.name for p in filed.path.iterdir()) == [
        "dumps", "log.txt", "measure.json", "ops.csv", "provenance-counters.json",
        "provenance-traces.json", "provenance.json", "steps.csv", "traces.tar.gz"]
    assert sorted(p.name for p in (filed.path / "dumps").iterdir()) == sorted(STEPS)
    # The profiled step's run directory has its program back, from its dump.
    traces = _members(filed.path / "traces.tar.gz")
    assert traces[f"steps/{PROFILED}/hlo/jit_step.txt"] == gzip.decompress(
        (H200_RUN / "dumps" / STEPS[0]).read_bytes())
    # The measured variant is in the spec; the impossible L2 figure set aside, and said.
    assert filed.spec == specs / "h200.toml"
    spec = load_spec_file(filed.spec, variant="measured")
    assert spec.roof("bf16", "matrix").achieved.value == pytest.approx(782.1e12, rel=1e-3)
    assert any(flag.startswith("L2 bandwidth measured 7.864 EB/s, beyond what any device")
               for flag in filed.flags)
    # Nothing left beside the run: no staging folder.
    assert [p.name for p in (measurements / "h200").iterdir()] == [DAY]


def test_a_second_filing_of_the_same_run_is_refused_and_keeps_everything(source_run, place):
    measurements, specs = place
    first = file_run(source_run, measurements, spec_dir=specs)
    before, spec = _tree(measurements), (specs / "h200.toml").read_bytes()
    with pytest.raises(GpuRunError, match=rf"provenance.json: this run is filed already, at "
                                          rf"{first.path}: pass --replace"):
        file_run(source_run, measurements, spec_dir=specs)
    assert _tree(measurements) == before and (specs / "h200.toml").read_bytes() == spec


def test_replace_files_the_run_again_in_its_place(source_run, place):
    measurements, specs = place
    first = file_run(source_run, measurements, spec_dir=specs)
    (first.path / "ops.csv").write_text("an edit made since\n")
    (first.path / "dumps" / STEPS[1]).unlink()
    again = file_run(source_run, measurements, replace=True, spec_dir=specs)
    assert again.path == first.path and again.replaced
    assert (again.path / "ops.csv").read_bytes() == (source_run / "ops.csv").read_bytes()
    assert (again.path / "dumps" / STEPS[1]).is_file()
    assert [p.name for p in (measurements / "h200").iterdir()] == [DAY]


def test_later_runs_are_filed_beside_the_earlier_ones(source_run, place, tmp_path):
    measurements, specs = place
    first = file_run(source_run, measurements, spec_dir=specs)
    kept = _tree(first.path)
    same_day = _with_record(_copy(source_run, tmp_path / "same-day"),
                            date="2026-11-28T20:00:00+00:00")
    later = _with_record(_copy(source_run, tmp_path / "later"),
                         date="2026-12-01T09:30:00+00:00")
    assert file_run(same_day, measurements, spec_dir=specs).path.name == f"{DAY}-2"
    assert file_run(later, measurements, spec_dir=specs).spec == specs / "h200.toml"
    assert [p.name for p in filed_runs(measurements / "h200")] == [DAY, f"{DAY}-2",
                                                                   "2026-12-01"]
    assert _tree(first.path) == kept
    # A run older than one filed joins them, and the spec keeps the newest run's variant.
    spec = (specs / "h200.toml").read_bytes()
    older = _with_record(_copy(source_run, tmp_path / "older"),
                         date="2026-11-20T09:30:00+00:00")
    filed = file_run(older, measurements, spec_dir=specs)
    assert filed.path.name == "2026-11-20" and filed.spec is None
    assert (specs / "h200.toml").read_bytes() == spec


def test_filed_runs_are_the_run_folders_in_date_order(tmp_path):
    for name in ("2026-11-28-10", "2026-12-01", "2026-11-28", "2026-11-28-2", "notes",
                 ".2026-12-02.filing-x"):
        (tmp_path / name).mkdir()
        if name != "notes":
            (tmp_path / name / "measure.json").write_text("{}")
    assert [p.name for p in filed_runs(tmp_path)] == ["2026-11-28", "2026-11-28-2",
                                                      "2026-11-28-10", "2026-12-01"]
    assert filed_runs(tmp_path / "no-such-gpu") == []


def _json_with(path: Path, change) -> None:
    record = json.loads(path.read_text())
    change(record)
    path.write_text(json.dumps(record))


def _rewrite_row(path: Path, line: int, column: str, value: str) -> None:
    rows = list(csv.DictReader(io.StringIO(path.read_text())))
    rows[line - 2][column] = value
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=list(rows[0]))
    writer.writeheader()
    writer.writerows(rows)
    path.write_text(buffer.getvalue())


def _truncate(path: Path, size: int) -> None:
    path.write_bytes(path.read_bytes()[:size])


# (damage, the file the refusal names, what it says of where and what)
DAMAGED = {
    "missing provenance": (lambda run: (run / "provenance.json").unlink(),
                           "provenance.json", "no such file"),
    "truncated provenance": (lambda run: _truncate(run / "provenance.json", 200),
                             "provenance.json", "not JSON"),
    "provenance without its device": (
        lambda run: _json_with(run / "provenance.json", lambda r: r.pop("device_kind")),
        "provenance.json", "field 'device_kind': is missing"),
    "provenance of an unknown date": (
        lambda run: _with_record(run, date="last tuesday"),
        "provenance.json", "field 'date': is 'last tuesday', not an ISO date"),
    "NaN in measure.json": (
        lambda run: _json_with(run / "measure.json",
                               lambda r: r["clock"].update(sm_mhz_median=float("nan"))),
        "measure.json", "field 'clock.sm_mhz_median': is nan, not a finite number"),
    "negative copy rate": (
        lambda run: _json_with(run / "measure.json", lambda r: r["copy"].update(best=-1.0)),
        "measure.json", "field 'copy.best': is -1.0"),
    "measure.json of another GPU": (
        lambda run: _json_with(run / "measure.json",
                               lambda r: r["facts"].update(name="NVIDIA H100 80GB HBM3")),
        "measure.json", "field 'facts.name'"),
    "corrupt traces archive": (lambda run: _truncate(run / "traces.tar.gz", 5000),
                               "traces.tar.gz", "not a readable tar archive"),
    "corrupt dumps archive": (lambda run: _truncate(run / "dumps.tar.gz", 3000),
                              "dumps.tar.gz", "not a readable tar archive"),
    "negative step_s": (lambda run: _rewrite_row(run / "steps.csv", 2, "step_s", "-0.01"),
                        "steps.csv", "line 2, field 'step_s': '-0.01' is not a finite number"),
    "a step without its dump": (
        lambda run: (run / "dumps.tar.gz").write_bytes(tar_archive(
            {STEPS[0]: (H200_RUN / "dumps" / STEPS[0]).read_bytes()})),
        "steps.csv", f"line 3, field 'dump': names '{STEPS[1]}'"),
    "NaN op time": (lambda run: _rewrite_row(run / "ops.csv", 5, "time_us", "nan"),
                    "ops.csv", "line 5, field 'time_us': 'nan' is not a finite number"),
}


@pytest.mark.parametrize("case", list(DAMAGED))
def test_a_damaged_run_is_refused_naming_file_and_field_with_nothing_written(
        source_run, place, tmp_path, capsys, case):
    measurements, specs = place
    damage, file, says = DAMAGED[case]
    run = _copy(source_run, tmp_path / "run")
    damage(run)
    spec = (specs / "h200.toml").read_bytes()
    with pytest.raises(GpuRunError) as refused:
        file_run(run, measurements, spec_dir=specs)
    assert f"{run / file}: " in str(refused.value) and says in str(refused.value)
    code = main(["hardware", "file-run", str(run), "--measurements", str(measurements),
                 "--hardware-dir", str(specs)])
    error = capsys.readouterr().err
    assert code == 2 and error == f"roofline: error: {refused.value}\n"
    assert not measurements.exists() and (specs / "h200.toml").read_bytes() == spec


@pytest.mark.parametrize("given, says", [("nowhere", "does not exist"),
                                         ("a-file", "is a file, not a folder")])
def test_a_source_that_is_no_folder_is_refused(place, tmp_path, capsys, given, says):
    measurements, specs = place
    (tmp_path / "a-file").write_text("")
    code = main(["hardware", "file-run", str(tmp_path / given), "--measurements",
                 str(measurements), "--hardware-dir", str(specs)])
    error = capsys.readouterr().err
    assert code == 2 and error.startswith(f"roofline: error: {tmp_path / given}: {says}")
    assert error.count("\n") == 1 and not measurements.exists()


def test_a_refused_spec_write_files_nothing(source_run, place, monkeypatch):
    measurements, specs = place
    spec = (specs / "h200.toml").read_bytes()

    def refused(*args, **kwargs):
        raise RooflineError(f"cannot write {specs / 'h200.toml'}: No space left on device")
    monkeypatch.setattr(gpu_runs, "write_spec", refused)
    with pytest.raises(RooflineError, match="No space left on device"):
        file_run(source_run, measurements, spec_dir=specs)
    assert not measurements.exists() and (specs / "h200.toml").read_bytes() == spec


def test_a_refused_rename_puts_back_the_earlier_filing_and_the_spec(source_run, place,
                                                                    monkeypatch):
    measurements, specs = place
    file_run(source_run, measurements, spec_dir=specs)
    (specs / "h200.toml").write_text((specs / "h200.toml").read_text() + "# edited since\n")
    before, spec = _tree(measurements), (specs / "h200.toml").read_bytes()
    rename = pathlib.Path.rename

    def fails_for_staging(self, target):
        if ".filing-" in self.name:
            raise OSError(18, "Invalid cross-device link")
        return rename(self, target)
    monkeypatch.setattr(pathlib.Path, "rename", fails_for_staging)
    with pytest.raises(RooflineError, match="Invalid cross-device link; nothing was filed"):
        file_run(source_run, measurements, replace=True, spec_dir=specs)
    assert _tree(measurements) == before and (specs / "h200.toml").read_bytes() == spec


def test_the_command_files_refuses_again_and_replaces(source_run, place, capsys):
    measurements, specs = place
    command = ["hardware", "file-run", str(source_run), "--measurements", str(measurements),
               "--hardware-dir", str(specs)]
    assert main(command) == 0
    out = capsys.readouterr()
    assert out.out == (f"filed h200's run at {measurements / 'h200' / DAY}\n"
                       f"wrote its measured variant into {specs / 'h200.toml'}\n")
    assert "roofline: flag: L2 bandwidth measured 7.864 EB/s" in out.err
    assert main(command) == 2
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and "this run is filed already" in error
    assert main([*command, "--replace"]) == 0
    assert "in place of its earlier filing" in capsys.readouterr().out
