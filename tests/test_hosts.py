"""A profiling session that traced several hosts: jax.profiler writes one
``HOST.xplane.pb`` per host into ``plugins/profile/<session>/``. Every host is found,
``--host`` picks one or all, and the output names the hosts it read."""

import json
import os
import shutil

import pytest

from roofline.cli import main
from roofline.program.trace import read_trace
from tests.conftest import TRACES


@pytest.fixture(scope="module")
def session(tmp_path_factory):
    """Two hosts of one session (the MI300X conv and GEMM traces standing for two hosts'
    files), and an older session of one host that must not be read."""
    run = tmp_path_factory.mktemp("run")
    old = run / "plugins" / "profile" / "2026_01_01_00_00_00"
    new = run / "plugins" / "profile" / "2026_01_02_00_00_00"
    old.mkdir(parents=True)
    new.mkdir(parents=True)
    shutil.copy(TRACES / "mi300x_jax08_elementwise.xplane.pb", old / "worker-0.xplane.pb")
    os.utime(old / "worker-0.xplane.pb", (1_000_000, 1_000_000))
    shutil.copy(TRACES / "mi300x_jax08_conv.xplane.pb", new / "worker-0.xplane.pb")
    shutil.copy(TRACES / "mi300x_jax08_gemm.xplane.pb", new / "worker-1.xplane.pb")
    return run


def test_the_first_host_is_read_by_default_and_the_others_are_named(session, capsys):
    run = read_trace(session)
    conv = read_trace(TRACES / "mi300x_jax08_conv.xplane.pb")
    assert (run.host, run.hosts) == ("worker-0", ("worker-0", "worker-1"))
    # The newest session's first host, not the older session's file of the same name.
    assert run.op_seconds_per_step == pytest.approx(conv.op_seconds_per_step)
    assert main(["explain", str(session)]) == 0
    text = capsys.readouterr().out
    assert "host worker-0 read, of 2 in this profiling session (also worker-1)" in text
    assert "--host all" in text


def test_host_picks_one_file_of_the_session(session, capsys):
    gemm = read_trace(TRACES / "mi300x_jax08_gemm.xplane.pb")
    run = read_trace(session, host="worker-1")
    assert run.host == "worker-1" and run.op_seconds_per_step == pytest.approx(
        gemm.op_seconds_per_step)
    assert main(["explain", str(session), "--host", "worker-1", "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert (doc["host"], doc["hosts"]) == ("worker-1", ["worker-0", "worker-1"])


def test_host_all_sets_every_device_of_every_host_side_by_side(session, capsys):
    assert main(["explain", str(session), "--host", "all", "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    # The conv ran data-parallel on all 8 GPUs of worker-0; the GEMMs on GPU 0 of worker-1
    # alone (its 7 other planes hold no XLA op).
    assert doc["hosts"] == ["worker-0", "worker-1"]
    assert [row["device"] for row in doc["devices"]] == (
        [f"worker-0:/device:GPU:{i}" for i in range(8)] + ["worker-1:/device:GPU:0"])
    assert doc["skipped_without_xla_ops"] == [f"worker-1:/device:GPU:{i}" for i in range(1, 8)]
    assert main(["explain", str(session), "--host", "all"]) == 0
    assert "2 hosts (worker-0, worker-1)" in capsys.readouterr().out


def test_a_trace_file_is_its_own_host(capsys):
    # The fixtures sit side by side in traces/, but a file given alone is one host.
    run = read_trace(TRACES / "mi300x_jax08_gemm.xplane.pb")
    assert run.hosts == ("mi300x_jax08_gemm",) and run.device_label == "/device:GPU:0"


@pytest.mark.parametrize("argv, message", [
    (["--host", "worker-9"], "no host 'worker-9' in this profiling session; its hosts are "
                             "worker-0, worker-1"),
    (["--host", "all", "--device", "3"], "--host all explains every device of every host"),
    (["--host", "all", "--plot", "p.png"], "--annotate, --plot and --html take one device"),
])
def test_a_wrong_host_choice_is_refused(session, capsys, argv, message):
    assert main(["explain", str(session), *argv]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err
