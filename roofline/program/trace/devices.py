"""Which device a profile of several is read for when none is asked for: the one rule of
every reader (xplane kernel tables, Nsight Systems, Nsight Compute) and of the
"(busiest)" mark of ``--device all``, and the note that says it was applied."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

from roofline.units import Kind, format_quantity

Device = TypeVar("Device")


def busiest_device(devices: Sequence[Device], kernel_s: Callable[[Device], float],
                   total_s: Callable[[Device], float] | None = None) -> Device:
    """Of ``devices`` (in device order), the one with the most kernel time (copies apart),
    then the most time with its copies (``total_s``, where the format records copies),
    then the first."""
    if not devices:
        raise ValueError("no device to choose from")
    with_copies = total_s or kernel_s
    # max keeps the first of equal keys: the first in device order.
    return max(devices, key=lambda device: (kernel_s(device), with_copies(device)))


def busiest_note(shown: str, kernel_times: Sequence[tuple[str, float]], *,
                 copies: bool = True, every_device: bool = True) -> str:
    """What a reader says when it chose ``shown`` by :func:`busiest_device` among the
    devices of ``kernel_times`` ((label, kernel time), in device order): ``copies``,
    whether the format records copies (left out of the time); ``every_device``, whether
    ``--device all`` can show each."""
    times = ", ".join(f"{label} {format_quantity(seconds, Kind.TIME)}"
                      for label, seconds in kernel_times)
    return (f"{shown} shown: the GPU with the most kernel time of {len(kernel_times)} "
            f"({times}{'; copies apart' if copies else ''}); --device N picks another"
            + (", --device all shows each" if every_device else ""))
