"""The host's datasheet fp32 peak comes from its CPU model, not from the widest
instruction set it decodes (issue 15: a Zen 4 decodes AVX-512 but runs it on 256-bit
units)."""

import pytest

from roofline.hardware.measure import CpuFacts, HostMeasurement, fp32_flop_per_cycle

AVX2 = {"avx", "avx2", "fma"}
AVX512 = AVX2 | {"avx512f"}


@pytest.mark.parametrize("vendor, family, model, name, flags, expected", [
    # Zen 4 (EPYC 9004, family 19h model 11h): AVX-512 on 2 x 256-bit FMA pipes,
    # 2 x 8 fp32 x 2 = 32, not the 64 that AVX-512's width would give.
    ("AuthenticAMD", 0x19, 0x11, "AMD EPYC 9B14", AVX512, 32),
    ("AuthenticAMD", 0x19, 0x01, "AMD EPYC 7B13", AVX2, 32),         # Zen 3
    ("AuthenticAMD", 0x17, 0x31, "AMD EPYC 7B12", AVX2, 32),         # Zen 2
    ("AuthenticAMD", 0x17, 0x01, "AMD EPYC 7601", AVX2, 16),         # Zen: 2 x 4 x 2
    ("AuthenticAMD", 0x1A, 0x02, "AMD EPYC 9B45", AVX512, 64),       # Zen 5: 2 x 16 x 2
    ("GenuineIntel", 6, 0x55, "Intel(R) Xeon(R) Platinum 8163 CPU", AVX512, 64),
    ("GenuineIntel", 6, 0x55, "Intel(R) Xeon(R) Silver 4114 CPU", AVX512, 32),
    ("GenuineIntel", 6, 0x3F, "Intel(R) Xeon(R) CPU E5-2680 v3", AVX2, 32),
    ("GenuineIntel", 6, 0x2D, "Intel(R) Xeon(R) CPU E5-2670", {"avx"}, 16),
])
def test_fp32_flop_per_cycle_follows_the_cpu_model(vendor, family, model, name, flags,
                                                   expected):
    assert fp32_flop_per_cycle(vendor, family, model, name, flags)[0] == expected


def test_the_reason_names_the_datapath_width():
    _, why = fp32_flop_per_cycle("AuthenticAMD", 0x19, 0x11, "AMD EPYC 9B14", AVX512)
    assert "AVX-512 instructions run on 256-bit units" in why and "(2 x 8 fp32 x 2)" in why


def _measurement(one: float, every: float) -> HostMeasurement:
    facts = CpuFacts("AMD EPYC", "AuthenticAMD", 2, 2.45e9, 32, "Zen 3", 1 << 30)
    result = {"matrix": {"fp32": one, "bf16": one / 4}, "vector_fp32": 1e9,
              "vector_bf16": 1e9}
    return HostMeasurement(facts, result, {**result, "matrix": {"fp32": every,
                                                                 "bf16": every / 4}}, "today")


def test_a_measured_roof_above_the_datasheet_is_flagged_and_its_share_given():
    # 2 cores x 2.45 GHz x 32 = 156.8 GFLOP/s; 213 GFLOP/s measured is 136% of it.
    m = _measurement(109e9, 213e9)
    assert any("fp32 on all cores: 213 GFLOP/s exceeds the datasheet peak 156.8 GFLOP/s"
               in flag for flag in m.flags())
    assert "= 156.8 GFLOP/s; measured fp32 matrix is 136% of it" in m.datasheet_text()


def test_all_cores_no_better_than_one_is_flagged():
    # 107.9 on two cores against 109.3 on one (the quick measure): flagged.
    flags = _measurement(109.3e9, 107.9e9).flags()
    assert any("no better than on one" in flag for flag in flags)
    assert not any("no better" in flag for flag in _measurement(60e9, 110e9).flags())


def test_cache_bandwidth_is_measured_at_two_sizes_per_level(monkeypatch):
    # A cache level is measured with arrays of a quarter and a sixteenth of its size (the
    # better of the two is kept: a shared last-level cache does not always hold half its
    # size for one process); DRAM with one size well past the last cache.
    from roofline.hardware import host_kernels

    monkeypatch.setattr(host_kernels, "cache_sizes", lambda: {"L1": (48 << 10, "0"),
                                                          "L2": (1 << 20, "0"),
                                                          "L3": (32 << 20, "0-1")})
    sizes = host_kernels._level_sizes(quick=False)
    assert sizes["L3"] == (8 << 20, 2 << 20)
    assert sizes["L2"] == (256 << 10, 64 << 10)
    assert sizes["L1"] == (12 << 10, 3 << 10)
    assert sizes["DRAM"] == (128 << 20,)
