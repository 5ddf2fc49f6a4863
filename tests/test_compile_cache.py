"""One compile cache for every command that compiles a SPEC (issue 18 item 4): in the
user's cache directory by default, ``--cache DIR`` elsewhere, ``--no-cache`` for none; and
a capacity search that compiles each batch once and names the best one."""

import json

import pytest

import roofline.program.compile as compile_module
from roofline.cli import main
from roofline.hardware import load_hardware
from roofline.model.analysis import throughput_at_capacity
from roofline.program.workloads import parse_spec

SPEC = "matmul:m=64,n=64,k=64,dtype=f32"


@pytest.fixture
def compiles(monkeypatch):
    """How many times XLA is asked to compile, from here on."""
    calls = []
    real = compile_module.compile_program

    def counted(*args, **kwargs):
        calls.append(args[2] if len(args) > 2 else kwargs.get("target"))
        return real(*args, **kwargs)
    monkeypatch.setattr(compile_module, "compile_program", counted)
    return calls


def _entries(directory):
    return sorted(p for p in directory.rglob("*.json"))


def test_analyze_keeps_its_program_in_the_user_cache_and_reuses_it(tmp_path, monkeypatch,
                                                                    capsys, compiles):
    monkeypatch.setenv("ROOFLINE_CACHE_DIR", str(tmp_path / "user"))
    assert main(["analyze", SPEC, "--target", "host", "--format", "json"]) == 0
    first = json.loads(capsys.readouterr().out)
    assert _entries(tmp_path / "user") and len(compiles) == 1
    assert main(["analyze", SPEC, "--target", "host", "--format", "json"]) == 0
    second = json.loads(capsys.readouterr().out)
    assert len(compiles) == 1                  # served from the cache
    assert second["compile_seconds"] == 0.0 and first["totals"] == second["totals"]


def test_no_cache_compiles_and_keeps_nothing(tmp_path, monkeypatch, capsys, compiles):
    monkeypatch.setenv("ROOFLINE_CACHE_DIR", str(tmp_path / "user"))
    for _ in range(2):
        assert main(["analyze", SPEC, "--target", "host", "--no-cache"]) == 0
    assert len(compiles) == 2 and not (tmp_path / "user").exists()


def test_the_python_api_keeps_programs_in_the_users_cache_as_the_commands_do(
        tmp_path, monkeypatch, compiles):
    # By default the library keeps compiled programs where the commands do: the user's
    # cache (under $XDG_CACHE_HOME, or where $ROOFLINE_CACHE_DIR says), and reads them back.
    import roofline
    from roofline.model.questions import CompileOptions

    monkeypatch.delenv("ROOFLINE_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert CompileOptions().cache == tmp_path / "xdg" / "roofline" / "programs"
    roofline.analyze(SPEC, "xeon-8163")
    roofline.analyze(SPEC, "xeon-8163")
    assert _entries(tmp_path / "xdg" / "roofline" / "programs") and len(compiles) == 1
    compiles.clear()
    monkeypatch.setenv("ROOFLINE_CACHE_DIR", str(tmp_path / "env"))
    first = roofline.analyze(SPEC, "xeon-8163")
    assert _entries(tmp_path / "env") and len(compiles) == 1
    again = roofline.analyze(SPEC, "xeon-8163")
    assert again.placement.seconds == first.placement.seconds and len(compiles) == 1
    # Turned off (as the command line's --no-cache does): none, whatever the environment.
    assert CompileOptions(cache_from_environment=False).cache is None
    assert CompileOptions(cache_dir=tmp_path / "given").cache == tmp_path / "given"


def test_cache_dir_given(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("ROOFLINE_CACHE_DIR", str(tmp_path / "user"))
    assert main(["whatif", SPEC, "--hardware", "v100-sxm2", "--target", "host",
                 "--scale", "memory_bandwidth=2", "--cache", str(tmp_path / "mine")]) == 0
    assert _entries(tmp_path / "mine") and not (tmp_path / "user").exists()


def test_cache_and_no_cache_together_are_refused(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["analyze", SPEC, "--cache", "x", "--no-cache"])
    assert exc.value.code == 2


def test_a_repeated_prediction_is_served_from_the_cache(tmp_path, monkeypatch, capsys,
                                                        compiles):
    monkeypatch.setenv("ROOFLINE_CACHE_DIR", str(tmp_path / "user"))
    args = ["predict", "fc:layers=2,nodes=256,batch=64,dtype=bf16", "--from", "tpu-v2",
            "--to", "tpu-v3", "--format", "json"]
    assert main(args) == 0
    first = json.loads(capsys.readouterr().out)
    assert sorted(compiles) == ["tpu-v2", "tpu-v3"]
    assert main(args) == 0
    assert len(compiles) == 2                  # nothing compiled the second time
    assert json.loads(capsys.readouterr().out)["speedup"] == first["speedup"]


def test_capacity_search_compiles_each_batch_once_and_names_the_best(tmp_path, monkeypatch,
                                                                      compiles):
    # A TPU v2 core with 1/1024 of its 8 GiB (8 MiB): this FC step needs 4.1 MiB at batch
    # 512 and 15.3 MiB at 4096. Every batch the search tries is compiled once (the largest
    # that fits is not compiled again to be placed), and the best throughput is that of
    # one of the fitting batches, at least the largest's.
    import roofline.program.compile as compile_module

    specs = []
    real = compile_module.compile_workload

    def recorded(workload, *args, **kwargs):
        specs.append(workload.spec)
        return real(workload, *args, **kwargs)
    monkeypatch.setattr(compile_module, "compile_workload", recorded)
    small = load_hardware("tpu-v2").scaled({"memory_capacity": 1 / 1024})
    build = lambda batch: parse_spec(f"fc:layers=2,nodes=256,input=256,output=256,"  # noqa: E731
                                     f"batch={batch},dtype=bf16")
    found = throughput_at_capacity(build, "tpu-v2", small, start=512, resolution=0.25,
                                   cache_dir=tmp_path)
    assert len(specs) == len(set(specs)) == len(compiles) >= 4   # 512 ... 4096, bisection
    assert 1024 <= found.batch < 4096 and 512 <= found.best_batch <= found.batch
    assert found.best_samples_per_s >= found.samples_per_s
    again = throughput_at_capacity(build, "tpu-v2", small, start=512, resolution=0.25,
                                   cache_dir=tmp_path)
    assert len(compiles) == len(set(specs))                # all served from the cache
    assert (again.batch, again.best_batch) == (found.batch, found.best_batch)


def _damage_devices(record):
    del record["devices"]


def _damage_memory(record):
    record["memory"]["temp_bytes"] = "a lot"


def _damage_op(record):
    record["costs"]["ops"][0]["flops"] = "many"


def _damage_xla(record):
    record["xla"] = {"flops": [1]}


@pytest.mark.parametrize("damage, named", [
    (_damage_devices, "devices is NoneType, not int"),
    (_damage_memory, "MemoryFootprint.temp_bytes is str, not float"),
    (_damage_op, "OpCost.flops is str, not float"),
    (_damage_xla, "float() argument must be"),
], ids=["missing key", "memory wrong type", "op cost wrong type", "xla wrong type"])
def test_a_damaged_record_is_set_aside_and_compiled_again(tmp_path, capsys, compiles,
                                                          damage, named):
    # Issue 34: valid JSON with a key missing or of the wrong type raised KeyError or
    # TypeError, or refused the SPEC ("cannot compile ... KeyError").
    argv = ["analyze", SPEC, "--target", "host", "--format", "json", "--cache", str(tmp_path)]
    assert main(argv) == 0
    first = json.loads(capsys.readouterr().out)
    [program] = [p for p in _entries(tmp_path) if "hlo_text" in json.loads(p.read_text())]
    record = json.loads(program.read_text())
    damage(record)
    program.write_text(json.dumps(record))
    assert main(argv) == 0
    out, err = capsys.readouterr()
    # 64 x 64 x 64 matmul: 2 * 64^3 = 524288 FLOPs, as the first answer had it.
    assert json.loads(out)["totals"] == first["totals"]
    assert json.loads(out)["totals"]["flops"] == 2 * 64**3
    assert len(compiles) == 2                                  # compiled again
    aside = program.with_suffix(".json.damaged")
    assert err == (f"roofline: damaged compile-cache record ({named}"
                   + err.split(named, 1)[1]) and err.count("\n") == 1
    assert f"set aside as {aside}; compiling again" in err and aside.exists()
    assert "hlo_text" in json.loads(program.read_text())       # kept again, whole
    assert main(argv) == 0 and len(compiles) == 2              # and served from it


def test_an_index_entry_naming_a_path_is_not_followed(tmp_path, capsys, compiles):
    argv = ["analyze", SPEC, "--target", "host", "--format", "json", "--cache", str(tmp_path)]
    assert main(argv) == 0
    capsys.readouterr()
    [index] = [p for p in _entries(tmp_path) if "lowered" in json.loads(p.read_text())]
    elsewhere = tmp_path / "elsewhere.json"
    elsewhere.write_text('{"hlo_text": 1}')
    # An absolute "key" made the record's path that file itself.
    index.write_text(json.dumps({"lowered": str(elsewhere.with_suffix(""))}))
    assert main(argv) == 0
    out, err = capsys.readouterr()
    # 2 * 64^3 FLOPs: the program found by its lowered text, the file left alone.
    assert json.loads(out)["totals"]["flops"] == 2 * 64**3 and err == ""
    assert len(compiles) == 2 and elsewhere.read_text() == '{"hlo_text": 1}'
