"""Bad input at the command line: exit 2, a message of a few lines naming the input and
the fix, never a traceback (issue 14's table; outputs in test_outputs.py, sweeps in
test_sweep.py, spec files in test_spec_files.py)."""

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from roofline.cli import main
from roofline.render.tables import to_json

SPEC = "matmul:m=8,n=8,k=8,dtype=f32"
WHATIF = ["whatif", SPEC, "--hardware", "v100-sxm2"]
PREDICT_OPS = ["predict", "--ops", "tests/data/ops/host_one_core_f32.csv", "--from",
               "v100-sxm2", "--to", "a100-80gb"]
SWEEP = ["sweep", "fc", "--hardware", "tpu-v2", "--out", "never"]

CASES = [
    ("scale inf", [*WHATIF, "--scale", "flops=inf"], "scale factor 'inf' is outside"),
    ("scale 1e400", [*WHATIF, "--scale", "flops=1e400"], "scale factor '1e400' is outside"),
    ("scale 1e-320", [*WHATIF, "--scale", "flops=1e-320"], "is outside 1e-06 to 1e+06"),
    ("scale nan", [*WHATIF, "--scale", "memory_bandwidth=nan"], "scale factor 'nan'"),
    ("scale text", [*WHATIF, "--scale", "flops=fast"], "scale factor 'fast' is not a number"),
    ("power negative", [*WHATIF, "--scale", "flops=2", "--power", "-5"],
     "'-5': give a positive number"),
    ("power nan", [*WHATIF, "--scale", "flops=2", "--power", "nan"],
     "'nan': give a positive number"),
    ("device word", ["explain", "traces/mi300x_jax08_conv.xplane.pb", "--device",
                     "first"], "a device number or 'all'"),
    ("model args a number", ["analyze", "tests.user_models:scalar_arguments"],
     "returned int as its arguments"),
    ("model args a string", ["analyze", "tests.user_models:text_arguments"],
     "returned str as its arguments"),
    ("model batch_argnums", ["analyze", "tests.user_models:batch_out_of_range"],
     "batch_argnums (7,) must index its 1 arguments"),
    ("model path", ["analyze", "../x:build"], "is not a Python module name"),
    ("layers unbounded", ["analyze", "fc:layers=100000"], "layers=100000 is more than 1024"),
    ("integer overflow", ["analyze", "matmul:m=99999999999999999999,n=8,k=8"],
     "is more than 1099511627776"),
    # 2147483647 x 2147483647 f32: 1.84e19 bytes, past int64: XLA aborted (exit 134).
    ("array past any device", ["analyze", "matmul:m=2147483647,n=2147483647,k=8"],
     "an array of 1.84e+19 bytes"),
    ("parameter twice", ["analyze", "matmul:m=1,m=2,n=8,k=8"], "gives m twice"),
    # Past Python's 4,300-digit int() limit; quoted by its start, not whole on one line.
    ("parameter of 5000 digits", ["analyze", f"matmul:m={'9' * 5000},n=8,k=8"],
     "m='99999999999999999999'... (5000 characters) is not a valid int"),
    ("kernel past the image", ["analyze", "conv2d:height=1,width=1,kernel=7"],
     "a 7x7 kernel does not fit a 1x1 image"),
    # Issue 46: a row or label count outside what can be shown is refused, not taken as
    # Python's slice (--top -5 left out the last five rows).
    ("top negative", ["explain", "traces/mi300x_jax08_conv.xplane.pb", "--top", "-5"],
     "'-5': give a whole number from 0 to 1,000,000"),
    ("label-top past the figure", ["plot", "roofline", SPEC, "--hardware", "tpu-v3",
                                   "--label-top", "5000"],
     "'5000': give a whole number from 0 to 100"),
    ("whatif top", [*WHATIF, "--scale", "flops=2", "--top", "ten"],
     "'ten': give a whole number from 0 to 1,000,000"),
    ("sweep workers 0", ["sweep", "fc", "--hardware", "tpu-v2", "--out", "never", "--workers",
                         "0"], "'0': give a whole number from 1 to 1,024"),
    # Issue 34: an empty output path wrote nothing (and `sweep --out ''` wrote into the
    # current directory); `out.png/` wrote out.png.
    ("out empty", ["analyze", SPEC, "--out", ""], "--out is an empty path: give a file name"),
    ("plot empty", ["analyze", SPEC, "--plot", ""], "--plot is an empty path"),
    ("annotate empty", ["explain", "traces/mi300x_jax08_conv.xplane.pb",
                        "--annotate", ""], "--annotate is an empty path"),
    ("plot ends in /", ["analyze", SPEC, "--plot", "out.png/"],
     "cannot write --plot out.png/: it names a directory"),
    ("out ends in /.", ["analyze", SPEC, "--out", "out.json/."], "it names a directory"),
    ("sweep out empty", ["sweep", "fc", "--hardware", "tpu-v2", "--out", ""],
     "--out is an empty path: give a directory"),
    # Issue 34, item 3: every number within a documented range (spec figures in
    # test_spec_files.py, ops tables in test_ops_table.py, traces in test_properties.py).
    ("power 1e300", [*WHATIF, "--scale", "flops=2", "--power", "1e300"],
     "'1e300': give a positive number of watts from 0.01 to 1e+06"),
    ("target floor negative", [*PREDICT_OPS, "--target-floor", "-5 us"],
     "'-5 us': give a fixed cost per op from 0 s to 1 s"),
    ("target floor 1000000 s", [*PREDICT_OPS, "--target-floor", "1000000 s"],
     "'1000000 s': give a fixed cost per op from 0 s to 1 s"),
    ("host floor without unit", [*PREDICT_OPS, "--host-floor", "6"],
     "cannot read '6' as a time"),
    # 1..10^12 step 1 is 10^12 values: refused before a list of them is built.
    ("sweep grid axis 1e12", [*SWEEP, "--grid", "batch=1..1000000000000+1"],
     "makes 1,000,000,000,000 sweep tasks (models x targets), more than 100,000"),
    # 1000 x 1000 values x the default grid's 4 inputs x 5 outputs x 9 batches x 1 target.
    ("sweep grid product", [*SWEEP, "--grid", "layers=1..1000+1", "--grid", "nodes=1..1000+1"],
     "the grid makes 180,000,000 sweep tasks"),
    ("profile steps 1e9", ["profile", SPEC, "--out", "never", "--steps", "1000000000"],
     "makes 1,000,000,002 profiled and warm-up steps, more than 10,000: ask for fewer, or "
     "set ROOFLINE_MAX_PROFILE_STEPS"),
    # Issue 34, item 5: an option given twice, or two that contradict, is refused (argparse
    # and the NAME=VALUE lists kept the last silently), in one line and a --help hint.
    ("option twice", [*WHATIF, "--target", "host", "--target", "tpu-v2"],
     "roofline whatif: error: --target is given twice: give it once\n"
     "try 'roofline whatif --help'"),
    ("argparse error", ["whatif", SPEC],
     "roofline whatif: error: the following arguments are required: --hardware\n"
     "try 'roofline whatif --help'\n"),
    ("scale twice", [*WHATIF, "--scale", "flops=2", "--scale", "flops=3"],
     "--scale gives flops twice: give it once"),
    ("grid twice", [*SWEEP, "--grid", "batch=8", "--grid", "batch=16"],
     "--grid gives batch twice"),
    ("grid and set", [*SWEEP, "--grid", "batch=8,16", "--set", "batch=8"],
     "batch is given by both --grid and --set: give it once"),
    ("devices with ops", [*PREDICT_OPS, "--devices", "2"],
     "--devices needs INPUT, not --ops"),
    # Issue 34, item 6: user code is the SPEC's error, whatever it raises.
    ("model args hold object()", ["analyze", "tests.user_models:object_arguments"],
     "argument 0 holds a value of type object, not an array"),
    ("model raises KeyboardInterrupt", ["analyze", "tests.user_models:interrupts"],
     "tests.user_models:interrupts raised KeyboardInterrupt"),
    ("model calls sys.exit(3)", ["analyze", "tests.user_models:exits"],
     "tests.user_models:exits called sys.exit(3) instead of returning (fn, args)"),
    ("sys:exit as a SPEC", ["analyze", "sys:exit"], "sys:exit called sys.exit(None)"),
    ("the CLI as a SPEC", ["analyze", "roofline.cli:main"],
     "the roofline command was called from inside itself"),
]


@pytest.mark.parametrize("argv, message", [case[1:] for case in CASES],
                         ids=[case[0] for case in CASES])
def test_bad_input_is_one_short_message_and_exit_2(capsys, argv, message):
    try:
        code = main(argv)
    except SystemExit as exit_:      # argparse's own refusals
        code = exit_.code
    err = capsys.readouterr().err
    assert code == 2 and message in err, err
    # argparse's refusals come after the command's usage lines; the message itself is short.
    said = [line for line in err.splitlines() if not line.startswith(("usage:", " "))]
    assert "Traceback" not in err and len(said) < 5
    assert max(map(len, said)) <= 400, "a message quotes its input whole"


def test_json_output_never_holds_infinity_or_nan():
    text = to_json({"ratio": float("inf"), "rows": [{"x": float("nan"), "y": 1.5}]})
    assert json.loads(text) == {"ratio": None, "rows": [{"x": None, "y": 1.5}]}
    assert "Infinity" not in text and "NaN" not in text


@pytest.mark.parametrize("source, message", [
    ("def build(:\n", "syntax error in the module of SPEC"),
    ("raise RuntimeError('boom')\n", "raised RuntimeError: boom"),
], ids=["syntax error", "raises on import"])
def test_a_users_broken_model_file_is_named(tmp_path, monkeypatch, capsys, source, message):
    # A model file in the working directory, as docs/tour.md's "Your own JAX model" has it.
    monkeypatch.chdir(tmp_path)
    name = f"broken_{abs(hash(source)) % 10**6}"
    (tmp_path / f"{name}.py").write_text(source)
    assert main(["analyze", f"{name}:build"]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


# --- directories the tool writes into (issue 34 items 1 and 2) ------------------------------
# Each is checked before any work, with one message naming the option; a command that
# compiles must refuse before its compile.

SWEEP = ["sweep", "fc", "--set", "layers=1", "--set", "input=16", "--set", "output=8",
         "--grid", "batch=8", "--hardware", "v100-sxm2", "--workers", "1"]
DIRECTORY_OPTIONS = {
    "sweep --out": lambda path, spare: [*SWEEP, "--out", path],
    "sweep --cache": lambda path, spare: [*SWEEP, "--out", spare, "--cache", path],
    "profile --out": lambda path, spare: ["profile", SPEC, "--out", path],
    "validate --keep": lambda path, spare: ["validate", "--suite", "host", "--quick",
                                            "--keep", path],
    "analyze --cache": lambda path, spare: ["analyze", SPEC, "--cache", path],
}


def _a_file(tmp):
    (tmp / "plain").write_text("kept")
    return str(tmp / "plain")


def _a_fifo(tmp):
    os.mkfifo(tmp / "fifo")
    return str(tmp / "fifo")


def _under_a_file(tmp):
    return _a_file(tmp) + "/sub"


def _link_to_nothing(tmp):
    (tmp / "dangling").symlink_to(tmp / "gone")
    return str(tmp / "dangling")


BAD_DIRECTORIES = [
    ("a file", _a_file, "it is a file, not a directory"),
    ("/dev/full", lambda tmp: "/dev/full", "it is a character device, not a directory"),
    ("a FIFO", _a_fifo, "it is a FIFO, not a directory"),
    ("under a file", _under_a_file, "plain is a file, not a directory"),
    ("empty", lambda tmp: "", "is an empty path: give a directory"),
    ("a link to nothing", _link_to_nothing, "it is a symbolic link to nothing"),
]


@pytest.fixture
def no_compile(monkeypatch):
    import roofline.program.compile as compile_module

    def refuse(*args, **kwargs):
        raise AssertionError("compiled before the output directory was checked")
    monkeypatch.setattr(compile_module, "compile_program", refuse)


@pytest.mark.parametrize("option", list(DIRECTORY_OPTIONS))
@pytest.mark.parametrize("make, message", [case[1:] for case in BAD_DIRECTORIES],
                         ids=[case[0] for case in BAD_DIRECTORIES])
def test_a_bad_output_directory_is_refused_before_any_work(tmp_path, capsys, no_compile,
                                                           option, make, message):
    path = make(tmp_path)
    before = sorted(p.name for p in tmp_path.iterdir())
    assert main(DIRECTORY_OPTIONS[option](path, str(tmp_path / "spare"))) == 2
    err = capsys.readouterr().err
    name = option.split()[1]
    assert err.startswith("roofline: error: ") and f"{name} {path}" in err and message in err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert sorted(p.name for p in tmp_path.iterdir()) == before   # nothing written


def test_a_link_to_a_directory_is_a_directory(tmp_path, capsys):
    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "real")
    assert main(["analyze", SPEC, "--cache", str(tmp_path / "link")]) == 0
    assert list((tmp_path / "real").rglob("*.json"))


@pytest.mark.parametrize("value, message", [
    (_a_file, "cannot write into $ROOFLINE_CACHE_DIR "),
    (lambda tmp: "/dev/null", "$ROOFLINE_CACHE_DIR /dev/null: it is a character device"),
], ids=["a file", "/dev/null"])
def test_an_unusable_cache_named_in_the_environment_is_refused(tmp_path, monkeypatch, capsys,
                                                               no_compile, value, message):
    monkeypatch.setenv("ROOFLINE_CACHE_DIR", value(tmp_path))
    assert main(["analyze", SPEC]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1


def test_an_unusable_default_cache_is_done_without_and_said(tmp_path, monkeypatch, capsys):
    # The user's cache directory, $XDG_CACHE_HOME, is a file: the answer comes, uncached.
    monkeypatch.delenv("ROOFLINE_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", _a_file(tmp_path))
    assert main(["analyze", SPEC, "--format", "json"]) == 0
    out, err = capsys.readouterr()
    assert json.loads(out)["totals"]["flops"] == 2 * 8 * 8 * 8   # 2 m n k, one FMA = 2
    assert err.splitlines() == [
        f"roofline: compiling without a cache: cannot write into the compile cache "
        f"{tmp_path}/plain/roofline/programs: {tmp_path}/plain is a file, not a directory; "
        "give a directory, or set $ROOFLINE_CACHE_DIR"]


# --- the same as an unprivileged user: read-only directories, an unwritable home ---------

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def as_nobody():
    """Run ``python -m roofline ARGV`` as the user nobody (root writes anywhere), in a
    process of its own. The venv's interpreter may sit where nobody cannot reach it (a
    pyenv under /root): then the system's interpreter of the same version runs, with the
    venv's packages."""
    if os.geteuid() != 0:
        pytest.skip("switching to the user nobody needs root")
    import sysconfig

    packages = sysconfig.get_paths()["purelib"]
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    for python, path in ((sys.executable, str(REPO)),
                         (shutil.which(version, path="/usr/local/bin:/usr/bin"),
                          f"{REPO}:{packages}")):
        env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": path, "JAX_PLATFORMS": "cpu",
               "HOME": "/nonexistent"}
        try:
            if python and subprocess.run([python, "-c", "import roofline.cli"], env=env,
                                         user="nobody", cwd="/", capture_output=True,
                                         timeout=60).returncode == 0:
                break
        except PermissionError:    # nobody may not reach it
            continue
    else:
        pytest.skip("the user nobody can run no Python with this repository's packages")

    def run(argv, **more_env):
        return subprocess.run([python, "-m", "roofline", *argv], user="nobody",
                              env={**env, **more_env}, cwd="/", capture_output=True,
                              text=True, timeout=300)
    return run


@pytest.fixture
def shared_tmp():
    """A directory nobody can reach (pytest's own are root's alone)."""
    path = Path(tempfile.mkdtemp(prefix="roofline-nobody-"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.mark.parametrize("option", list(DIRECTORY_OPTIONS))
def test_a_read_only_directory_is_refused(as_nobody, shared_tmp, option):
    (shared_tmp / "ro").mkdir(mode=0o555)
    argv = DIRECTORY_OPTIONS[option](str(shared_tmp / "ro" / "new"), str(shared_tmp / "ro"))
    done = as_nobody(argv)
    name = option.split()[1]
    assert done.returncode == 2, done.stderr
    assert done.stderr == (f"roofline: error: cannot write into {name} {shared_tmp}/ro/new: "
                           f"{shared_tmp}/ro is not writable (read-only, or another user's); "
                           "give another directory\n")


def test_an_unwritable_home_compiles_without_a_cache(as_nobody):
    # nobody's home, /nonexistent, is not there and / is not nobody's to write.
    done = as_nobody(["analyze", SPEC, "--format", "json"])
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["totals"]["flops"] == 2 * 8 * 8 * 8
    assert done.stderr == ("roofline: compiling without a cache: cannot write into the "
                           "compile cache /nonexistent/.cache/roofline/programs: / is not "
                           "writable (read-only, or another user's); give another directory, "
                           "or set $ROOFLINE_CACHE_DIR\n")


# --- files the tool reads (issue 34 item 1) ------------------------------------------------
# Every input is opened by one reader (roofline/input_files.py): anything but a regular file
# is refused (a FIFO blocks its reader forever, /dev/zero never ends), and so is a file past
# its kind's size limit, naming the file. Each case runs in a process of its own: a
# regression fails on the timeout instead of hanging the suite.

GEMM_TRACE = Path(__file__).parent.parent / "traces" / "mi300x_jax08_gemm.xplane.pb"
READ_SWEEP = ["sweep", "fc", "--grid", "layers=1", "--hardware", "tpu-v2", "--workers", "1"]
FIFO = "it is a FIFO, not a regular file"


def _fifo(path: Path) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    os.mkfifo(path)
    return str(path)


def _sparse(path: Path, size: int) -> str:
    with path.open("wb") as handle:
        handle.truncate(size)    # a hole: no disk is written
    return str(path)


def _run_with_fifo(tmp: Path, inside: str) -> tuple[str, str]:
    """A GPU run directory (one real trace) with a FIFO at ``inside``."""
    (tmp / "run").mkdir()
    shutil.copy(GEMM_TRACE, tmp / "run")
    return str(tmp / "run"), _fifo(tmp / "run" / inside)


def _run_command(tmp: Path, inside: str, command: list[str]) -> tuple[list[str], str]:
    """``command`` with its RUN the run directory (and a FIFO at ``inside``)."""
    run, fifo = _run_with_fifo(tmp, inside)
    return [run if word == "RUN" else word for word in command], fifo


def _cache_of_fifos(tmp: Path) -> tuple[list[str], str]:
    """A compile cache whose records (written by a first analyze) are all FIFOs."""
    cache = tmp / "cache"
    assert main(["analyze", SPEC, "--cache", str(cache)]) == 0
    records = sorted(cache.rglob("*.json"))
    assert records
    for record in records:
        record.unlink()
        os.mkfifo(record)
    return ["analyze", SPEC, "--cache", str(cache)], str(cache)


READ_CASES = [
    ("spec in --hardware-dir", lambda t: (["hardware", "show", "chip", "--hardware-dir",
                                           str(t)], _fifo(t / "chip.toml")), FIFO),
    ("spec path", lambda t: (["hardware", "show", str(t / "chip.toml")],
                             _fifo(t / "chip.toml")), FIFO),
    ("spec /dev/zero", lambda t: (["hardware", "show", "/dev/zero"], "/dev/zero"),
     "it is a character device, not a regular file"),
    # 2 GiB of hole, refused by its size before a byte is read (spec files: 1 MiB at most).
    ("spec of 2 GiB", lambda t: (["hardware", "show", str(t / "big.toml")],
                                 _sparse(t / "big.toml", 2 << 30)), "larger than 1 MiB"),
    ("trace", lambda t: (["explain", str(t / "t.xplane.pb")], _fifo(t / "t.xplane.pb")), FIFO),
    ("trace /dev/zero", lambda t: (["explain", "/dev/zero"], "/dev/zero"), "character device"),
    ("trace of 3 GiB", lambda t: (["explain", str(t / "big.xplane.pb")],
                                  _sparse(t / "big.xplane.pb", 3 << 30)), "larger than 2 GiB"),
    ("trace in a directory", lambda t: (["explain", str(t)], _fifo(t / "p" / "h.xplane.pb")),
     FIFO),
    ("plot input", lambda t: (["plot", "roofline", "/dev/zero", "--hardware", "mi300x",
                               "--out", str(t / "x.png")], "/dev/zero"), "character device"),
    ("PyTorch trace", lambda t: (["explain", str(t / "t.json")], _fifo(t / "t.json")), FIFO),
    ("HLO dump", lambda t: (["analyze", str(t / "m.txt")], _fifo(t / "m.txt")), FIFO),
    ("manifest: explain", lambda t: _run_command(t, "manifest.json", ["explain", "RUN"]),
     FIFO),
    ("manifest: whatif", lambda t: _run_command(
        t, "manifest.json", ["whatif", "RUN", "--hardware", "mi300x", "--scale", "flops=2"]),
     FIFO),
    ("manifest: plot", lambda t: _run_command(
        t, "manifest.json", ["plot", "roofline", "RUN", "--hardware", "mi300x", "--out",
                             str(t / "x.png")]), FIFO),
    ("saved HLO: explain", lambda t: _run_command(t, "hlo/m.txt", ["explain", "RUN"]), FIFO),
    ("saved HLO: sensitivity", lambda t: _run_command(
        t, "hlo/m.txt", ["sensitivity", "RUN", "--hardware", "mi300x"]), FIFO),
    ("saved HLO: predict", lambda t: _run_command(
        t, "hlo/m.txt", ["predict", "RUN", "--from", "mi300x", "--to", "h100-sxm"]), FIFO),
    ("HLO proto", lambda t: _run_command(t, "jit_f.hlo_proto.pb", ["explain", "RUN"]),
     FIFO),
    ("--ops FIFO", lambda t: (["predict", "--ops", str(t / "ops.csv"), "--from", "xeon-8163",
                               "--to", "v100-sxm2"], _fifo(t / "ops.csv")), FIFO),
    ("--ops directory", lambda t: (["predict", "--ops", str(t), "--from", "xeon-8163", "--to",
                                    "v100-sxm2"], str(t)), "it is a directory, not a regular"),
    ("sweep.json", lambda t: ([*READ_SWEEP, "--out", str(t)], _fifo(t / "sweep.json")), FIFO),
    ("sweep part", lambda t: ([*READ_SWEEP, "--out", str(t), "--extend"],
                              _fifo(t / "parts" / "0a.models.parquet")), FIFO),
    ("sweep table", lambda t: (["plot", "heatmap", str(t), "--x", "batch", "--y", "nodes",
                                "--out", str(t / "h.png")], _fifo(t / "models.parquet")), FIFO),
]


@pytest.mark.parametrize("make, message", [case[1:] for case in READ_CASES],
                         ids=[case[0] for case in READ_CASES])
def test_what_is_no_regular_file_to_read_is_refused_naming_it(tmp_path, capsys, make,
                                                             message):
    # In this process (a subprocess each cost 30 s in all), under an alarm: a reader that
    # blocked on a FIFO would fail the test, not hang the suite. An exception escaping
    # main() would be the traceback the command line must never show.
    argv, named = make(tmp_path)
    capsys.readouterr()
    with _alarm_after(120):
        code = main(argv)
    err = capsys.readouterr().err
    assert code == 2, err
    assert err.startswith("roofline: error: ") and named in err and message in err, err
    assert len(err.strip().splitlines()) <= 5


@contextlib.contextmanager
def _alarm_after(seconds: int):
    def stop(signum, frame):
        raise TimeoutError(f"the command was still running after {seconds} s: blocked?")
    previous = signal.signal(signal.SIGALRM, stop)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def test_compile_cache_records_that_are_fifos_are_set_aside_not_read(tmp_path):
    # The cache holds only what roofline wrote: what else is there is moved aside and the
    # program compiled again, never a refusal of valid input (nor a hang on the FIFO).
    argv, cache = _cache_of_fifos(tmp_path)
    done = subprocess.run([sys.executable, "-m", "roofline", *argv, "--format", "json"],
                          capture_output=True, text=True, timeout=120,
                          cwd=Path(__file__).parent.parent)
    assert done.returncode == 0, done.stderr
    assert "damaged compile-cache record" in done.stderr and FIFO in done.stderr
    # matmul 8x8x8: 2 * 8^3 = 1024 FLOPs.
    assert json.loads(done.stdout)["totals"]["flops"] == 1024
    assert list(Path(cache).rglob("*.json.damaged"))


# --- sweep directories and tables, XLA_FLAGS, standard output (issue 34 items 4 to 6) ---
# Each case makes its input under tmp_path and gives the command line to run on it.

TINY_SWEEP = ["sweep", "fc", "--set", "layers=1", "--set", "input=16", "--set", "output=8",
              "--grid", "batch=8", "--target", "host", "--hardware", "v100-sxm2",
              "--workers", "1"]


def _sweep_json(text):
    def make(tmp, monkeypatch):
        (tmp / "s").mkdir()
        (tmp / "s" / "sweep.json").write_text(text)
        return [*TINY_SWEEP, "--out", str(tmp / "s")]
    return make


def _parts_a_file(tmp, monkeypatch):
    (tmp / "s").mkdir()
    (tmp / "s" / "parts").write_text("not a directory")
    return [*TINY_SWEEP, "--out", str(tmp / "s")]


def _models_table(command, status="ok", drop=()):
    """A sweep's models.parquet of fc nodes 32, 64 x batch 8, 16 on v100-sxm2, compiled
    for the host; ``command`` reads it from DIR."""
    import pandas as pd

    def make(tmp, monkeypatch):
        (tmp / "s").mkdir()
        rows = [{"spec": f"fc:nodes={n},batch={b}", "family": "fc", "nodes": n, "batch": b,
                 "target": "host", "hardware": "v100-sxm2", "status": status,
                 "utilization": n * b / 1e4, "predicted_s": 1e-6}
                for n in (32, 64) for b in (8, 16)]
        pd.DataFrame(rows).drop(columns=list(drop)).to_parquet(tmp / "s" / "models.parquet")
        return [str(tmp / "s") if word == "DIR" else word for word in command]
    return make


def _bad_xla_flags(tmp, monkeypatch):
    # Refused before JAX reads it (XLA would end the test process with exit 1).
    monkeypatch.setenv("XLA_FLAGS", "--xla_no_such_flag=1")
    return ["analyze", SPEC, "--no-cache"]


REGRESS = ["regress", "DIR", "--hardware", "v100-sxm2"]
PREPARED_CASES = [
    ("definitions a string", _sweep_json('{"definitions": "abc"}'),
     "sweep.json: unreadable sweep definition ('definitions' is 'abc', not a list"),
    ("definitions of numbers", _sweep_json('{"definitions": [1, 2]}'),
     "'definitions' holds an entry that is not a sweep"),
    ("definitions {}", _sweep_json('{"definitions": {}}'), "'definitions' is {}, not a list"),
    ("sweep.json a list", _sweep_json("[]"), "[] is not an object with 'definitions'"),
    ("parts a file", _parts_a_file, "parts is not a directory: a sweep keeps its finished"),
    ("scheduler not an address",
     lambda tmp, mp: [*TINY_SWEEP, "--out", str(tmp / "s"), "--scheduler", "notaurl"],
     "cannot reach the Dask scheduler at 'notaurl': missing port number"),
    ("regress without family", _models_table(REGRESS, drop=["family"]),
     "models.parquet is not a sweep table: it has no column 'family'"),
    # The "no models for 'v100-sxm2'; the sweep has ['v100-sxm2']": the models are
    # there, none was analyzed.
    ("regress nothing analyzed", _models_table(REGRESS, status="does not fit"),
     "none of the 4 models on 'v100-sxm2' was analyzed (4 does not fit)"),
    ("regress other target", _models_table([*REGRESS, "--target", "tpu-v2"]),
     "the sweep has no models for target 'tpu-v2' (--target); it has host"),
    ("regress missing baseline", _models_table([*REGRESS, "--metric", "speedup",
                                                "--baseline", "tpu-v2"]),
     "the sweep has no models for hardware 'tpu-v2' (--baseline); it has v100-sxm2"),
    ("heatmap of text", _models_table(["plot", "heatmap", "DIR", "--x", "nodes", "--y",
                                       "batch", "--metric", "status", "--out", "h.png"]),
     "the sweep's column 'status' is not a number to color cells by"),
    ("XLA_FLAGS unknown flag", _bad_xla_flags,
     "XLA_FLAGS='--xla_no_such_flag=1': XLA refuses it (Unknown flag in XLA_FLAGS"),
]


@pytest.mark.parametrize("make, message", [case[1:] for case in PREPARED_CASES],
                         ids=[case[0] for case in PREPARED_CASES])
def test_prepared_bad_input_is_one_short_message_and_exit_2(tmp_path, monkeypatch, capsys,
                                                            make, message):
    monkeypatch.chdir(tmp_path)
    assert main(make(tmp_path, monkeypatch)) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err, err
    assert err.startswith("roofline: error: ") and len(err.strip().splitlines()) <= 5


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs Linux's /dev/full")
# 2.9 kB of text stays in the stream's 8 KiB buffer until the flush; 11.8 kB of JSON does not.
@pytest.mark.parametrize("argv", [["hardware", "list"],
                                  ["hardware", "show", "v100-sxm2", "--format", "json"]],
                         ids=["failing at the flush", "failing at a write"])
def test_standard_output_on_a_full_disk_is_one_message_and_exit_2(argv):
    # Python exited 120 when the flush at exit failed, or printed an OSError traceback.
    with open("/dev/full", "w") as full:
        done = subprocess.run([sys.executable, "-m", "roofline", *argv], stdout=full,
                              stderr=subprocess.PIPE, text=True, timeout=120,
                              cwd=Path(__file__).parent.parent)
    assert done.returncode == 2, done.stderr
    assert done.stderr == ("roofline: error: cannot write to standard output (No space left "
                           "on device): send it to a file or pipe that takes it, e.g. '> "
                           "result.txt'\n")


def test_a_reader_that_stops_reading_ends_the_command_quietly():
    # `roofline hardware show ... | head -0`: the reader closes the pipe before the output
    # comes; a shell tool then ends by SIGPIPE (128 + 13), silently.
    command = [sys.executable, "-m", "roofline", "hardware", "show", "v100-sxm2", "--format",
               "json"]
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          cwd=Path(__file__).parent.parent) as child:
        child.stdout.close()
        err = child.stderr.read().decode()
        code = child.wait(timeout=120)
    assert code == 141 and err == "", err


def test_a_message_quotes_a_long_value_by_its_start_and_length():
    from roofline.errors import quoted

    assert quoted("abc") == "'abc'" and quoted([]) == "[]"
    assert quoted("9" * 5000) == f"'{'9' * 20}'... (5000 characters)"   # 40 // 2 shown
    # JSON of {"a": 100 x's}: 7 characters before the x's and 2 after, 109 in all; the
    # first 30 // 2 = 15 are shown.
    assert quoted({"a": "x" * 100}, 30) == '{"a": "xxxxxxxx... (109 characters)'


def test_xla_flags_xla_accepted_are_checked_once(tmp_path, monkeypatch):
    import subprocess

    from roofline.errors import RooflineError
    from roofline.program import _xla

    # A flag XLA knows (it is XLA:CPU's): the child accepts it, and the verdict is marked.
    monkeypatch.setenv("XLA_FLAGS", "--xla_cpu_use_thunk_runtime=true")
    children = []
    real = subprocess.run
    monkeypatch.setattr(_xla.subprocess, "run",
                        lambda *a, **k: children.append(a) or real(*a, **k))
    _xla.check_xla_flags(tmp_path)
    _xla.check_xla_flags(tmp_path)
    assert len(children) == 1 and len(list(tmp_path.iterdir())) == 1
    # Flags XLA refuses are never marked: refused again, by a child each time.
    monkeypatch.setenv("XLA_FLAGS", "--xla_no_such_flag=1")
    for _ in range(2):
        with pytest.raises(RooflineError, match="XLA refuses it"):
            _xla.check_xla_flags(tmp_path)
    assert len(children) == 3 and len(list(tmp_path.iterdir())) == 1
