import pytest

from roofline.errors import UnitError
from roofline.units import Kind, format_quantity, parse_quantity


@pytest.mark.parametrize("text, kind, expected", [
    ("900 GB/s", Kind.BANDWIDTH, 900e9),
    ("119.21 GiB/s", Kind.BANDWIDTH, 119.21 * 2**30),  # HKBU's Xeon figure: 128.0e9 B/s
    ("496 Gbit/s", Kind.BANDWIDTH, 62e9),               # 496e9 bits / 8
    ("125 TFLOP/s", Kind.FLOP_RATE, 125e12),
    ("125 TFLOPS", Kind.FLOP_RATE, 125e12),
    ("624 TOPS", Kind.FLOP_RATE, 624e12),
    ("16 GiB", Kind.BYTES, 16 * 2**30),                 # 17179869184 B
    ("16 GB", Kind.BYTES, 16e9),
    ("96 KiB", Kind.BYTES, 96 * 1024),
    ("1530 MHz", Kind.FREQUENCY, 1.53e9),
    ("250 W", Kind.POWER, 250.0),
    ("5 us", Kind.TIME, 5e-6),
    ("5 µs", Kind.TIME, 5e-6),
    ("1.5e3 GB/s", Kind.BANDWIDTH, 1.5e12),
    ("900GB/s", Kind.BANDWIDTH, 900e9),
])
def test_parses_quantities_to_si(text, kind, expected):
    assert parse_quantity(text, kind) == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize("text, kind, message", [
    ("900 GB/s", Kind.FLOP_RATE, "is a bandwidth, but a compute rate belongs here"),
    ("125 TFLOP/s", Kind.BANDWIDTH, "is a compute rate, but a bandwidth belongs here"),
    ("16 GB", Kind.BANDWIDTH, "is a byte count, but a bandwidth belongs here"),
    ("96 KB", Kind.BYTES, "write kB (1000 bytes) or KiB (1024 bytes)"),
    ("25 Gb/s", Kind.BANDWIDTH, "write Gbit/s for bits or GB/s for bytes"),
    ("125 TFLOPs", Kind.FLOP_RATE, "'FLOPs' is a count of operations"),
    ("900", Kind.BANDWIDTH, "write a number and a unit"),
    ("fast GB/s", Kind.BANDWIDTH, "write a number and a unit"),
    ("900 GB/sec", Kind.BANDWIDTH, "unknown unit 'GB/sec'"),
    (900, Kind.BANDWIDTH, "written as a string with its unit"),
])
def test_refuses_wrong_or_ambiguous_units(text, kind, message):
    with pytest.raises(UnitError, match=message.replace("(", r"\(").replace(")", r"\)")):
        parse_quantity(text, kind)


@pytest.mark.parametrize("value, kind, text", [
    (125e12, Kind.FLOP_RATE, "125 TFLOP/s"),
    (900e9, Kind.BANDWIDTH, "900 GB/s"),
    (16 * 2**30, Kind.BYTES, "16 GiB"),
    (96 * 1024 * 80, Kind.BYTES, "7.5 MiB"),  # 80 SMs x 96 KiB
    (16e9, Kind.BYTES, "16 GB"),
    (5e-6, Kind.TIME, "5 us"),
])
def test_formats_for_people(value, kind, text):
    assert format_quantity(value, kind) == text
