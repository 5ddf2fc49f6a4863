"""Bad input at the command line: exit 2, a message of a few lines naming the input and
the fix, never a traceback (issue 14's table; outputs in test_outputs.py, sweeps in
test_sweep.py, spec files in test_spec_files.py)."""

import json

import pytest

from roofline.cli import main
from roofline.render.tables import to_json

SPEC = "matmul:m=8,n=8,k=8,dtype=f32"
WHATIF = ["whatif", SPEC, "--hardware", "v100-sxm2"]

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
    ("device word", ["explain", "tests/data/traces/mi300x_jax08_conv.xplane.pb", "--device",
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
    ("kernel past the image", ["analyze", "conv2d:height=1,width=1,kernel=7"],
     "a 7x7 kernel does not fit a 1x1 image"),
    ("sweep workers 0", ["sweep", "fc", "--hardware", "tpu-v2", "--out", "never", "--workers",
                         "0"], "give a whole number of 1 or more"),
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


def test_json_output_never_holds_infinity_or_nan():
    text = to_json({"ratio": float("inf"), "rows": [{"x": float("nan"), "y": 1.5}]})
    assert json.loads(text) == {"ratio": None, "rows": [{"x": None, "y": 1.5}]}
    assert "Infinity" not in text and "NaN" not in text


@pytest.mark.parametrize("source, message", [
    ("def build(:\n", "syntax error in the module of SPEC"),
    ("raise RuntimeError('boom')\n", "raised RuntimeError: boom"),
], ids=["syntax error", "raises on import"])
def test_a_users_broken_model_file_is_named(tmp_path, monkeypatch, capsys, source, message):
    # A model file in the working directory, as README's "Your own JAX model" has it.
    monkeypatch.chdir(tmp_path)
    name = f"broken_{abs(hash(source)) % 10**6}"
    (tmp_path / f"{name}.py").write_text(source)
    assert main(["analyze", f"{name}:build"]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err
