"""The lighter install: the deviceless TPU and GPU compilers are extras (`tpu`, `gpu`,
both in `all`, which the README installs); without one, asking for its device names the
extra to install, and what still runs says whose ops it placed."""

import importlib.util
import tomllib

from roofline.cli import main
from roofline.program.compile import CACHE_ENV_VAR
from tests.readme_commands import FRONT_PAGE, ROOT

FC = "fc:layers=1,nodes=64,input=32,output=8,batch=16,dtype=bf16"
COMPILERS = {"tpu": {"libtpu"},
             "gpu": {"jax-cuda12-plugin", "jax-cuda12-pjrt", "nvidia-cuda-nvcc-cu12"}}


def _name(requirement: str) -> str:
    return requirement.split("==")[0].split("[")[0]


def test_the_compilers_are_pinned_extras_the_readme_and_the_tests_install():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extras = project["optional-dependencies"]
    core = {_name(r) for r in project["dependencies"]}
    for extra, packages in COMPILERS.items():
        assert {_name(r) for r in extras[extra]} == packages
        assert all("==" in r for r in extras[extra])
        assert not core & packages
    assert extras["all"] == ["roofline[tpu,gpu]"]
    assert "roofline[all]" in extras["test"]
    assert "pip install -e '.[all]' && .venv/bin/roofline hardware list" in \
        FRONT_PAGE.read_text()


def _empty_cache(monkeypatch, tmp_path) -> None:
    """An empty program cache: a program the suite compiled before for the same device is
    read back without asking for the compiler, and these tests ask what an install that
    never had the compiler says when it must compile."""
    monkeypatch.setenv(CACHE_ENV_VAR, str(tmp_path))


def test_a_tpu_asked_for_without_libtpu_names_the_tpu_extra(monkeypatch, capsys, tmp_path):
    _empty_cache(monkeypatch, tmp_path)
    found = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "libtpu" else found(name, *a))
    assert main(["analyze", FC, "--hardware", "tpu-v2"]) == 2
    error = capsys.readouterr().err
    assert len(error.splitlines()) == 1 and "Traceback" not in error
    assert "TPU topology 'v2:2x2' without a TPU needs libtpu" in error
    assert "pip install -e '.[tpu]'" in error


def test_a_gpu_without_its_compiler_is_placed_from_the_host_compile_and_says_so(
        monkeypatch, capsys, tmp_path):
    from roofline.program import gpu_target

    _empty_cache(monkeypatch, tmp_path)
    monkeypatch.setattr(gpu_target, "deviceless_available", lambda: False)
    assert main(["analyze", FC, "--hardware", "h100-sxm"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "the ops are those of XLA:CPU" in out
    assert "install roofline's gpu extra (pip install -e '.[gpu]'" in out
    assert main(["analyze", FC, "--hardware", "h100-sxm", "--target", "gpu"]) == 2
    error = capsys.readouterr().err
    assert "the deviceless XLA:GPU compiler is not installed" in error
    assert "pip install -e '.[gpu]'" in error and "Traceback" not in error
