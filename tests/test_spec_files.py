"""Loading, validating and deriving hardware records from spec files."""

import os
import re
from pathlib import Path

import pytest

from roofline.errors import ScaleError, SpecError, UnknownHardwareError
from roofline.hardware import load_hardware, load_spec_file


def test_loads_at_default_scope(testchip_path):
    hw = load_spec_file(testchip_path)
    assert hw.scope == "board"
    # Values stated per core/chip, converted to the 8-core board:
    assert hw.roof("bf16", "matrix").flop_per_s == pytest.approx(160e12)   # 20 T x 8 cores
    assert hw.main_memory.capacity_bytes == 64 * 2**30                     # 8 GiB x 8 cores
    assert hw.main_memory.bytes_per_s == pytest.approx(2000e9)             # 250 GB/s x 8
    assert hw.tdp.value == pytest.approx(400.0)                            # 100 W x 4 chips
    assert hw.links[0].bytes_per_s == pytest.approx(800e9)                 # 200 GB/s x 4
    assert hw.links[0].count == 16                                         # 4 x 4 chips
    assert dict(hw.counts)["mxu"] == 8                                     # 1 per core
    assert hw.clock.value == 1e9 and hw.overhead.value == 2e-6            # not extensive


def test_at_scope_keeps_intensive_values_and_ridges(testchip_path):
    board = load_spec_file(testchip_path)
    core = board.at_scope("core")
    assert core.roof("bf16", "matrix").flop_per_s == pytest.approx(20e12)
    assert core.main_memory.capacity_bytes == pytest.approx(8 * 2**30)
    assert core.overhead.value == board.overhead.value
    assert core.clock.value == board.clock.value
    assert board.scope == "board"  # the original is untouched
    with pytest.raises(UnknownHardwareError, match="has no scope 'rack'"):
        board.at_scope("rack")


def test_variant_overrides_value_and_scope(testchip_path):
    hw = load_spec_file(testchip_path, variant="alt")
    assert hw.roof("bf16", "matrix").flop_per_s == pytest.approx(200e12)  # 50 T x 4 chips
    assert hw.variant == "alt"
    assert hw.clock.value == 1.1e9 and hw.base_clock.value == 800e6
    with pytest.raises(UnknownHardwareError, match="no variant 'nope'; its variants: alt"):
        load_spec_file(testchip_path, variant="nope")


def test_records_are_frozen(testchip_path):
    hw = load_spec_file(testchip_path)
    with pytest.raises(AttributeError):
        hw.id = "other"  # type: ignore[misc]


def test_scaled_returns_new_record(testchip_path):
    hw = load_spec_file(testchip_path)
    faster = hw.scaled(memory_bandwidth=1.5)
    assert faster.main_memory.bytes_per_s == pytest.approx(3000e9)
    assert hw.main_memory.bytes_per_s == pytest.approx(2000e9)
    assert faster.modifications == (("memory_bandwidth", 1.5),)
    both = hw.scaled({"flops.matrix.bf16": 2, "bandwidth.VMEM": 0.5, "overhead": 3})
    assert both.roof("bf16", "matrix").flop_per_s == pytest.approx(320e12)
    assert both.roof("fp32", "vector").flop_per_s == pytest.approx(16e12)  # untouched
    assert both.level("VMEM").bytes_per_s == pytest.approx(16e12)          # 32 TB/s x 0.5
    assert both.overhead.value == pytest.approx(6e-6)
    assert hw.scaled(flops=2).roof("fp32", "vector").flop_per_s == pytest.approx(32e12)
    assert hw.scaled(link_bandwidth=2).links[0].bytes_per_s == pytest.approx(1600e9)
    assert hw.scaled(memory_capacity=2).main_memory.capacity_bytes == 128 * 2**30


@pytest.mark.parametrize("factors, message", [
    ({"memory_bandwith": 1.5},
     "no parameter 'memory_bandwith' to scale. Did you mean 'memory_bandwidth'"),
    ({"memory_bandwidth": 0}, "must be a positive number, got 0"),
    ({"flops": -2}, "must be a positive number, got -2"),
    ({"flops.fp64": 2}, "no parameter 'flops.fp64'"),
])
def test_scaled_rejects_bad_factors(testchip_path, factors, message):
    with pytest.raises(ScaleError, match=re.escape(message)):
        load_spec_file(testchip_path).scaled(factors)


# A table of realistic mistakes: (edit of the valid testchip.toml, key named, message).
_FP32 = 'peak = "2 TFLOP/s"\nscope = "core"\nsource = "sheet"'

MALFORMED = [
    ("typo in a key", ('bandwidth = "250 GB/s"', 'bandwith = "250 GB/s"'),
     "memory[0].bandwith", "unknown key 'bandwith'. Did you mean 'bandwidth'?"),
    ("bandwidth where a FLOP rate belongs", ('peak = "20 TFLOP/s"', 'peak = "900 GB/s"'),
     "compute[0].peak", "is a bandwidth, but a compute rate belongs here"),
    ("FLOP rate where a capacity belongs", ('capacity = "8 GiB"', 'capacity = "8 TFLOP/s"'),
     "memory[0].capacity", "is a compute rate, but a byte count belongs here"),
    ("number without unit", ('peak = "2 TFLOP/s"', "peak = 2e12"),
     "compute[1].peak", "written as a string with its unit"),
    ("ambiguous KB", ('capacity = "16 MiB"', 'capacity = "16384 KB"'),
     "memory[1].capacity", "write kB (1000 bytes) or KiB (1024 bytes)"),
    ("bits or bytes", ('bandwidth = "200 GB/s"', 'bandwidth = "200 Gb/s"'),
     "links[0].bandwidth", "write Gbit/s for bits or GB/s for bytes"),
    ("zero bandwidth", ('bandwidth = "250 GB/s"', 'bandwidth = "0 GB/s"'),
     "memory[0].bandwidth", "must be positive"),
    ("negative peak", ('peak = "2 TFLOP/s"', 'peak = "-2 TFLOP/s"'),
     "compute[1].peak", "must be positive"),
    ("source missing", ('peak = "2 TFLOP/s"\nscope = "core"\nsource = "sheet"',
                        'peak = "2 TFLOP/s"\nscope = "core"'),
     "compute[1].source", "every number needs a source"),
    ("source not defined", ('tdp = "100 W"\nscope = "chip"\nsource = "sheet"',
                            'tdp = "100 W"\nscope = "chip"\nsource = "shet"'),
     "power.source", "'shet' is not defined in [sources]. Did you mean 'sheet'?"),
    ("unknown scope", ('name = "ICI"\ncount = 4\nbandwidth = "200 GB/s"\nscope = "chip"',
                       'name = "ICI"\ncount = 4\nbandwidth = "200 GB/s"\nscope = "host"'),
     "links[0].scope", "unknown scope 'host'; this file declares core, chip, board"),
    ("default scope not declared", ('default_scope = "board"', 'default_scope = "pod"'),
     "default_scope", "'pod' is not declared in [scopes]"),
    ("fractional scope size", ("chip = 2", "chip = 2.5"),
     "scopes.chip", "expected a whole number of base units"),
    ("board not whole chips", ("chip = 2", "chip = 3"),
     "scopes.board", "board = 8 is not a whole number of chip (3)"),
    ("no base scope", ("core = 1", "core = 2"),
     "scopes", "the smallest scope is the base unit and has size 1"),
    ("unknown dtype", ('dtype = "bf16"', 'dtype = "bfloat16"'),
     "compute[0].dtype", "'bfloat16' is not one of fp64, fp32"),
    ("unknown unit", ('unit = "matrix"', 'unit = "tensor"'),
     "compute[0].unit", "'tensor' is not one of matrix, vector"),
    ("duplicate roof", ('unit = "vector"\ndtype = "fp32"', 'unit = "matrix"\ndtype = "bf16"'),
     "compute[1]", "a second bf16 matrix roof"),
    ("on-chip level larger than main memory", ('capacity = "16 MiB"', 'capacity = "16 GiB"'),
     "memory[1].capacity", "must be smaller than it (list memory levels far to near"),
    ("nearer level slower", ('bandwidth = "4 TB/s"', 'bandwidth = "40 GB/s"'),
     "memory[1].bandwidth", "cannot be slower than it"),
    ("main memory without bandwidth", ('bandwidth = "250 GB/s"\n', ""),
     "memory[0].bandwidth", "missing required key 'bandwidth'"),
    ("id does not match file name", ('id = "testchip"', 'id = "testchip2"'),
     "id", "must equal the file name without .toml"),
    ("undeclared alternative", ("alternatives.alt = { peak", "alternatives.paper = { peak"),
     "compute[0].alternatives.paper", "alternative 'paper' is not declared in [variants]"),
    ("broken TOML", ('name = "Test accelerator"', 'name = "Test accelerator'),
     None, "not valid TOML"),
    ("future schema", ("schema = 1", "schema = 2"),
     "schema", "unsupported schema 2"),
    ("unknown kind", ('kind = "tpu"', 'kind = "fpga"'),
     "kind", "'fpga' is not one of gpu, tpu, cpu"),
    ("base clock above boost", ('base = "800 MHz"', 'base = "1800 MHz"'),
     "clock.base", "the base clock cannot exceed the boost clock"),
    ("missing table", ('[overhead]\nper_op = "2 us"\nsource = "sheet"\n', ""),
     "overhead", "missing required key 'overhead'"),
    ("unpublished value without a note", ('tdp = "100 W"\n', ""),
     "power.tdp", "missing required key 'tdp' (if no source publishes it"),
    ("overhead without unit", ('per_op = "2 us"', 'per_op = "2"'),
     "overhead.per_op", "write a number and a unit"),
    ("handoff in the wrong unit", ('per_op = "2 us"', 'per_op = "2 us"\nhandoff = "3 GB"'),
     "overhead.handoff", "but a time belongs here"),
    ("first touch in the wrong unit", ('per_op = "2 us"',
                                       'per_op = "2 us"\nfirst_touch = "1.5 GB/s"'),
     "overhead.first_touch", "but a time belongs here"),
    ("time where power belongs", ('tdp = "100 W"', 'tdp = "100 ms"'),
     "power.tdp", "is a time, but a power belongs here"),
    ("achieved above the peak", (_FP32,
                                 _FP32 + '\nachieved = "3 TFLOP/s"\nachieved_source = "sheet"'),
     "compute[1].achieved", "exceeds the peak beside it"),
    ("achieved without its source", (_FP32, _FP32 + '\nachieved = "1.5 TFLOP/s"'),
     "compute[1].achieved_source", "a measured figure needs its own source"),
    ("achieved in the wrong unit", (_FP32,
                                    _FP32 + '\nachieved = "1.5 GB/s"\nachieved_source = "sheet"'),
     "compute[1].achieved", "is a bandwidth, but a compute rate belongs here"),
    ("schema as a boolean", ("schema = 1", "schema = true"), "schema", "unsupported schema"),
    ("a compute rate past any device", (_FP32, _FP32.replace('"2 TFLOP/s"', '"1e30 FLOP/s"')),
     "compute[1].peak", "beyond any device"),
    ("infinite link count", ("count = 4", "count = inf"), "links[0].count",
     "expected a whole number from 1 to 10,000,000, got inf"),
    # Plausibility at every scope (hardware_specs/README.md): a figure stated per core is
    # checked per board (8 cores) too, one stated per chip per core (half a chip).
    ("a board of 2^62 cores", ("board = 8", "board = 4611686018427387904"), "scopes.board",
     "from 1 (the base scope) to 1,000,000"),
    # 2 EFLOP/s per core passes alone; x 8 cores = 16 EFLOP/s per board, past 10 EFLOP/s.
    ("a rate past any device at the board scope",
     (_FP32, _FP32.replace('"2 TFLOP/s"', '"2 EFLOP/s"')), "compute[1].peak",
     "'2 EFLOP/s' comes to 16 EFLOP/s per board, more than 10 EFLOP/s"),
    ("a bandwidth of 1e-300 GB/s", ('bandwidth = "250 GB/s"', 'bandwidth = "1e-300 GB/s"'),
     "memory[0].bandwidth", "less than 1 MB/s"),
    # 15 mW per chip is 7.5 mW per core (2 cores a chip), under 10 mW.
    ("a power too small per core", ('tdp = "100 W"', 'tdp = "15 mW"'), "power.tdp",
     "'15 mW' comes to 0.0075 W per core, less than 0.01 W"),
    ("a clock of 1 kHz", ('boost = "1000 MHz"', 'boost = "1 kHz"'), "clock.boost",
     "less than 1 MHz"),
    ("an overhead of 2 s", ('per_op = "2 us"', 'per_op = "2 s"'), "overhead.per_op",
     "more than 1 s"),
    ("a latency of 1e-300 s", ('bandwidth = "250 GB/s"', 'bandwidth = "250 GB/s"\nlatency = '
                               '"1e-300 s"\nlatency_source = "sheet"'),
     "memory[0].latency", "less than 0.001 ns"),
    ("a count of 1e308", ("mxu = 1", "mxu = 1e308"), "counts.mxu",
     "expected a whole number from 1 to 10,000,000, got 1e+308"),
    # 2,000,000 MXUs per core x 8 cores = 1.6e7 per board, past 10,000,000.
    ("a count past the limit at the board scope", ("mxu = 1", "mxu = 2000000"), "counts.mxu",
     "2000000 comes to 1.6e+07 per board, more than 10,000,000"),
    ("a count of 5000 digits", ("mxu = 1", "mxu = " + "9" * 5000), None,
     "a number of thousands of digits"),
    ("a GEMM tile of 1e20 rows", ("[power]", '[gemm]\ntiles = ["100000000000000000000x128"]\n'
                                  'units = "mxu"\nsource = "sheet"\n\n[power]'),
     "gemm.tiles", "rows x columns of 1 to 4096 each"),
    ("scope as a list", ('scope = "core"', 'scope = ["core"]'), "counts.scope",
     "expected the name of a scope"),
    ("scope as a table", ('scope = "core"', 'scope = {a = 1}'), "counts.scope",
     "expected the name of a scope"),
    ("overhead with a note and no per_op", ('per_op = "2 us"', 'note = "none published"'),
     "overhead.per_op", "give per_op"),
    ("sustained clock above boost", ('base = "800 MHz"',
                                     'base = "800 MHz"\nsustained = "2 GHz"'
                                     '\nsustained_source = "sheet"'),
     "clock.sustained", "exceeds the peak beside it"),
    ("memory latency without its source", ('bandwidth = "250 GB/s"',
                                           'bandwidth = "250 GB/s"\nlatency = "400 ns"'),
     "memory[0].latency_source", "a measured figure needs its own source"),
    ("memory latency in the wrong unit", ('bandwidth = "250 GB/s"',
                                          'bandwidth = "250 GB/s"\nlatency = "400 GB/s"'
                                          '\nlatency_source = "sheet"'),
     "memory[0].latency", "is a bandwidth, but a time belongs here"),
    ("latency of a near level", ('bandwidth = "4 TB/s"',
                                 'bandwidth = "4 TB/s"\nlatency = "30 ns"'
                                 '\nlatency_source = "sheet"'),
     "memory[1].latency", "a latency is read for main memory only"),
]


@pytest.mark.parametrize("edit, key, message", [m[1:] for m in MALFORMED],
                         ids=[m[0] for m in MALFORMED])
def test_malformed_spec_is_refused_with_file_key_and_fix(tmp_path, testchip_path, edit, key,
                                                         message):
    old, new = edit
    text = testchip_path.read_text()
    assert old in text, "the edit must apply to the base file"
    path = tmp_path / "testchip.toml"
    path.write_text(text.replace(old, new, 1))
    with pytest.raises(SpecError) as info:
        load_spec_file(path)
    error = info.value
    assert str(path) in str(error)
    assert error.key == key
    assert message in str(error)


def test_an_overhead_of_zero_is_accepted(tmp_path, testchip_path):
    # What the refusal of a missing per_op recommends for a device without one.
    path = tmp_path / "testchip.toml"
    path.write_text(testchip_path.read_text().replace('per_op = "2 us"', 'per_op = "0 us"'))
    assert load_spec_file(path).overhead.value == 0.0


def test_unpublished_value_is_none_with_its_note(tmp_path, testchip_path):
    path = tmp_path / "testchip.toml"
    path.write_text(testchip_path.read_text().replace(
        'tdp = "100 W"', 'note = "The vendor publishes no TDP."'))
    hw = load_spec_file(path)
    assert hw.tdp.value is None and hw.tdp.note == "The vendor publishes no TDP."
    assert hw.at_scope("chip").tdp.value is None


def test_single_core_chip_may_repeat_a_scope_size(tmp_path, testchip_path):
    path = tmp_path / "testchip.toml"
    path.write_text(testchip_path.read_text().replace("chip = 2", "chip = 1"))
    assert load_spec_file(path).at_scope("chip").roof("bf16", "matrix").flop_per_s == 20e12


def test_missing_file_is_a_spec_error(tmp_path):
    with pytest.raises(SpecError, match="no such file"):
        load_spec_file(tmp_path / "absent.toml")


def test_unknown_id_lists_known_ids():
    with pytest.raises(UnknownHardwareError, match="no hardware spec with id 'v101'.*v100-sxm2"):
        load_hardware("v101")


def test_user_directory_overrides_and_extends(tmp_path, testchip_path, monkeypatch):
    (tmp_path / "testchip.toml").write_text(testchip_path.read_text())
    assert load_hardware("testchip", [tmp_path]).id == "testchip"
    monkeypatch.setenv("ROOFLINE_HARDWARE_PATH", str(tmp_path))
    assert load_hardware("testchip@alt:chip").roof("bf16", "matrix").flop_per_s == 50e12
    monkeypatch.setenv("ROOFLINE_HARDWARE_PATH", str(tmp_path / "missing"))
    with pytest.raises(Exception, match="ROOFLINE_HARDWARE_PATH names .* not a directory"):
        load_hardware("testchip")


def test_path_reference_loads_file(testchip_path):
    assert load_hardware(str(testchip_path)).id == "testchip"


def test_achievable_ceilings_replace_peaks_where_cited(tmp_path, testchip_path):
    # The vector fp32 roof gets a measured 1.5 TFLOP/s per core; HBM a measured 200 GB/s per
    # core; the clock sustains 600 of its 1000 MHz boost under load.
    text = testchip_path.read_text()
    text = text.replace(_FP32, _FP32 + '\nachieved = "1.5 TFLOP/s"\nachieved_source = "sheet"')
    text = text.replace('bandwidth = "250 GB/s"', 'bandwidth = "250 GB/s"\n'
                        'achieved = "200 GB/s"\nachieved_source = "sheet"')
    text = text.replace('base = "800 MHz"', 'base = "800 MHz"\nsustained = "600 MHz"\n'
                        'sustained_source = "sheet"')
    path = tmp_path / "testchip.toml"
    path.write_text(text)
    peak = load_spec_file(path, scope="core")
    achievable = peak.at_ceilings("achievable")
    # Cited figures as they are; the uncited bf16 matrix roof at 20 x 600 / 1000 = 12
    # TFLOP/s; the on-chip VMEM's bandwidth, bytes per clock like every on-chip level's,
    # at 600 / 1000 of its peak too; main memory's own clock is not the chip's.
    assert achievable.roof("fp32", "vector").flop_per_s == pytest.approx(1.5e12)
    assert achievable.roof("bf16", "matrix").flop_per_s == pytest.approx(12e12)
    assert achievable.main_memory.bytes_per_s == pytest.approx(200e9)
    assert achievable.level("VMEM").bytes_per_s == pytest.approx(
        0.6 * peak.level("VMEM").bytes_per_s)
    assert peak.roof("fp32", "vector").flop_per_s == pytest.approx(2e12)
    # Achieved figures scale with the scope like the peaks: a board is 8 cores.
    board = load_spec_file(path).at_ceilings("achievable")
    assert board.roof("fp32", "vector").flop_per_s == pytest.approx(8 * 1.5e12)
    # A what-if on bandwidth scales the measured figure too: 1.5 x 200 GB/s.
    assert peak.scaled({"memory_bandwidth": 1.5}).at_ceilings("achievable") \
        .main_memory.bytes_per_s == pytest.approx(300e9)
    assert dict(peak.ceiling_basis())["bf16 matrix"].startswith("peak x sustained/boost")
    assert dict(peak.ceiling_basis())["VMEM"].startswith("peak x sustained/boost")
    assert "achievable ceilings" in achievable.ceilings_summary()
    with pytest.raises(UnknownHardwareError, match="unknown ceilings"):
        peak.at_ceilings("typical")


def test_a_spec_citing_no_achieved_figure_says_its_ceilings_are_peaks():
    # The TPU specs cite no measured rate: a prediction's method says they are at their
    # peaks, so an expected time there is the bound.
    summary = load_hardware("tpu-v3").at_ceilings("achievable").ceilings_summary()
    assert summary == "tpu-v3 (board): datasheet peaks (no achievable figure is cited)"


def test_every_gpu_spec_cites_its_achievable_ceilings():
    # The GPU library's measured figures (hardware_specs/*.toml): each a cited measurement,
    # below its peak; every GPU has at least one.
    from roofline.hardware import list_hardware

    without = []
    for entry in list_hardware():
        hw = entry.hardware
        assert hw is not None, entry.error
        if hw.kind != "gpu":
            continue
        achieved = [r.achieved for r in hw.compute if r.achieved] + \
            [m.achieved for m in hw.memory if m.achieved]
        if not achieved:
            without.append(hw.id)
        for figure in achieved:
            assert figure.sources and all(k in dict(hw.sources) for k in figure.sources)
    assert without == []


@pytest.mark.parametrize("make, message", [
    (lambda tmp: Path("/dev/zero"), "not a regular file"),
    (lambda tmp: (os.mkfifo(tmp / "fifo.toml"), tmp / "fifo.toml")[1], "not a regular file"),
    (lambda tmp: (tmp / "deep.toml").write_text("x = " + "[" * 5000 + "]" * 5000)
     and tmp / "deep.toml", "nested too deeply"),
    (lambda tmp: (tmp / "big.toml").write_bytes(b"# " + b"x" * (2 << 20)) and tmp / "big.toml",
     "larger than 1 MiB"),
    (lambda tmp: (tmp / "latin.toml").write_bytes(b"name = \"caf\xe9\"") and tmp / "latin.toml",
     "not UTF-8"),
], ids=["device", "fifo", "nested", "huge", "latin-1"])
def test_what_is_not_a_spec_file_is_refused_without_reading_it_all(tmp_path, make, message):
    path = make(tmp_path)
    with pytest.raises(SpecError, match=message) as info:
        load_spec_file(path)
    assert str(path) in str(info.value)


def test_a_measured_handoff_is_read_per_variant_and_shown():
    # twocore: handoff 0.5 us on both cores, 3 us pinned to one (alternatives.one-core).
    from roofline.render.hardware import hardware_document, hardware_text

    path = Path(__file__).parent / "data" / "specs" / "twocore.toml"
    both = load_spec_file(path)
    one = load_spec_file(path, variant="one-core", scope="core")
    assert (both.handoff.value, one.handoff.value) == pytest.approx((0.5e-6, 3e-6))
    assert hardware_document(one)["handoff_s"]["value"] == pytest.approx(3e-6)
    assert "handoff to a worker thread 3 us per program of 1000 FLOPs" in hardware_text(one)


def test_every_gpu_cites_a_measured_ceiling_or_says_it_found_none():
    # Achievable ceilings are what predictions use: every GPU's main memory, its tensor
    # roofs (bf16, fp16, tf32, fp8) and its fp32 vector roof cite a measured figure, or
    # say in their note that none was found (they are then placed at their peak, and
    # hardware show lists them).
    from roofline.hardware import list_hardware

    missing = []
    for entry in list_hardware():
        hw = entry.hardware
        if hw is None or hw.kind != "gpu":
            continue
        records = [hw.main_memory] + [r for r in hw.compute if (r.unit, r.dtype) in (
            ("vector", "fp32"), *(("matrix", d) for d in ("bf16", "fp16", "tf32", "fp8")))]
        missing += [f"{hw.id} {getattr(r, 'label', getattr(r, 'name', ''))}" for r in records
                    if r.achieved is None and "No measured figure" not in r.note]
    assert missing == []



# CUDA C++ Programming Guide, 'Throughput of Native Arithmetic Instructions', row
# '32-bit floating-point reciprocal, reciprocal square root, base-2 logarithm, base 2
# exponential, sine, cosine': results per clock per SM, by compute capability.
SFU_RESULTS_PER_SM_CLOCK = {"3.5": 32, "5.2": 32, "6.0": 16, "6.1": 32, "7.0": 16, "7.5": 16,
                            "8.0": 16, "8.9": 16, "9.0": 16, "10.0": 16}


def test_an_h100s_transcendental_rate_is_its_special_function_units_at_its_clock():
    # cc 9.0: 16 results per clock per SM; 132 SMs at the 1980 MHz [clock] boost:
    # 16 x 132 x 1.98e9 = 4.18176e12 exponentials (log2, rcp, rsqrt, sin, cos) per second.
    h100 = load_hardware("h100-sxm")
    roof = h100.roof("fp32", "transcendental")
    assert roof.flop_per_s == pytest.approx(16 * 132 * 1.98e9) == pytest.approx(4.18176e12)
    assert roof.peak_text == "4.182 T/s"
    assert set(roof.sources) == {"cuda-guide-sfu", "derived-sfu", "fa3-sfu"}
    # One SM holds one SM's share: 16 x 1.98e9 = 31.68e9 per second.
    assert h100.at_scope("sm").roof("fp32", "transcendental").flop_per_s == pytest.approx(
        31.68e9)
    # A K40 (cc 3.5: 32 per SMX, 15 SMX) at its 745 MHz base clock: 357.6e9 per second,
    # and 32 x 15 x 875 MHz = 420e9 at its @boost875 application clock.
    assert load_hardware("k40").roof("fp32", "transcendental").flop_per_s == pytest.approx(
        357.6e9)
    assert load_hardware("k40@boost875").roof(
        "fp32", "transcendental").flop_per_s == pytest.approx(420e9)


def test_every_nvidia_spec_places_transcendentals_at_its_special_function_units():
    # Each NVIDIA spec's transcendental roof is the guide's per-SM rate for its compute
    # capability times its SM count times its [clock] boost.
    from roofline.hardware import list_hardware

    checked = []
    for entry in list_hardware():
        hw = entry.hardware
        if hw is None or hw.compute_capability is None:
            continue
        per_sm = SFU_RESULTS_PER_SM_CLOCK[hw.compute_capability]
        expected = per_sm * dict(hw.counts)["sm"] * hw.clock.value
        assert hw.roof("fp32", "transcendental").flop_per_s == pytest.approx(expected), hw.id
        checked.append(hw.id)
    assert len(checked) == 17

def test_a_transfer_places_both_devices_at_ceilings_measured_alike():
    # A T4 cites a cuBLAS SGEMM rate (4.2 of 8.1 TFLOP/s), a V100 PCIe no fp32 figure:
    # carrying a measured V100 op's efficiency to the T4's achieved rate would count the
    # library's efficiency twice, so both take their peaks there, each times its sustained
    # clock ratio (the T4's 900 / 1590 MHz: 8.1 x 0.566 = 4.58 TFLOP/s; the V100 PCIe
    # holds its 1380 MHz boost). Both cite a copy bandwidth: both keep it.
    from roofline.hardware.records import even_ceilings

    v100, t4 = even_ceilings(load_hardware("v100-pcie"), load_hardware("t4"), "achievable")
    assert t4.roof("fp32", "vector").flop_per_s == pytest.approx(8.1e12 * 900 / 1590)
    assert v100.roof("fp32", "vector").flop_per_s == pytest.approx(14e12)
    assert t4.main_memory.bytes_per_s == pytest.approx(245e9)
    assert v100.main_memory.bytes_per_s == pytest.approx(790e9)
    # so is its fp16 tensor-core rate (24 of 65 TFLOP/s: the V100 PCIe cites none)
    assert {"fp32 vector", "fp16 matrix"} <= t4.set_aside
    assert t4.ceilings_summary().endswith(
        "(peak where the other device cites none: fp16 matrix, fp32 vector)")
    # alone, a device keeps every figure it cites
    assert load_hardware("t4").at_ceilings("achievable").roof(
        "fp32", "vector").flop_per_s == pytest.approx(4.2e12)
