"""What a GPU says of itself, for ``roofline hardware measure``: its name, compute
capability, SMs, memory, L2, driver and software versions (:func:`gpu_facts`), and its
SM clock and power while it works (:class:`ClockSampler`).

JAX gives the name, capability, SM count and memory; NVML (the ``pynvml`` module of
nvidia-ml-py), else ``nvidia-smi``, gives the driver, clocks and power; CuPy or PyTorch,
where one is installed, gives the L2 size. Whatever none of them gives is None and the
measurement says so.
"""

from __future__ import annotations

import shutil
import statistics
import subprocess
import threading
import time
from dataclasses import asdict, dataclass, field
from importlib.metadata import PackageNotFoundError, version
from typing import Any


@dataclass(frozen=True)
class GpuFacts:
    name: str
    platform: str
    compute_capability: float
    sm_count: int | None
    memory_bytes: float | None
    l2_bytes: float | None
    driver: str | None
    max_sm_mhz: float | None
    software: dict[str, str] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @property
    def description(self) -> str:
        parts = [f"compute capability {self.compute_capability:g}"
                 if self.compute_capability else None,
                 f"{self.sm_count} SMs" if self.sm_count else None,
                 f"driver {self.driver}" if self.driver else None,
                 *(f"{name} {version}" for name, version in self.software.items())]
        return f"{self.name} (" + ", ".join(p for p in parts if p) + ")"


def gpu_facts(device: Any) -> GpuFacts:
    """The facts of the JAX ``device`` (a GPU, or any device the tests give)."""
    import jax

    capability = getattr(device, "compute_capability", None)
    stats = device.memory_stats() or {}
    software = {"jax": jax.__version__}
    plugins = ("jax-cuda13-plugin", "jax-cuda12-plugin") if device.platform == "gpu" else ()
    for package in ("jaxlib", *plugins):
        try:
            software[package] = version(package)
        except PackageNotFoundError:
            pass
    version_text = getattr(device.client, "platform_version", "")
    if version_text:
        software[device.platform + " runtime"] = str(version_text).strip()
    nvml = _nvml()
    return GpuFacts(
        name=device.device_kind, platform=device.platform,
        compute_capability=float(capability) if capability else 0.0,
        sm_count=getattr(device, "core_count", None),
        memory_bytes=stats.get("bytes_limit"),
        l2_bytes=_l2_bytes() if device.platform == "gpu" else None,
        driver=_driver(nvml) if device.platform == "gpu" else None,
        max_sm_mhz=_max_sm_mhz(nvml) if device.platform == "gpu" else None,
        software=software)


def _nvml() -> Any:
    """The initialized ``pynvml`` module, or None."""
    try:
        import pynvml

        pynvml.nvmlInit()
        return pynvml
    except Exception:   # not installed, or no driver: fall back to nvidia-smi
        return None


def _smi(query: str) -> list[str]:
    if shutil.which("nvidia-smi") is None:
        return []
    done = subprocess.run(["nvidia-smi", f"--query-gpu={query}",
                           "--format=csv,noheader,nounits", "--id=0"],
                          capture_output=True, text=True, timeout=30)
    return done.stdout.strip().split(", ") if done.returncode == 0 else []


def _driver(nvml: Any) -> str | None:
    if nvml is not None:
        version = nvml.nvmlSystemGetDriverVersion()
        return version.decode() if isinstance(version, bytes) else str(version)
    found = _smi("driver_version")
    return found[0] if found else None


def _max_sm_mhz(nvml: Any) -> float | None:
    if nvml is not None:
        handle = nvml.nvmlDeviceGetHandleByIndex(0)
        return float(nvml.nvmlDeviceGetMaxClockInfo(handle, nvml.NVML_CLOCK_SM))
    found = _smi("clocks.max.sm")
    return float(found[0]) if found and found[0].replace(".", "").isdigit() else None


def _l2_bytes() -> float | None:
    try:
        import cupy

        return float(cupy.cuda.runtime.getDeviceProperties(0)["l2CacheSize"])
    except Exception:   # CuPy absent or another CUDA runtime: try PyTorch
        pass
    try:
        import torch

        return float(torch.cuda.get_device_properties(0).L2_cache_size)
    except Exception:   # neither: the spec's L2 capacity stands in
        return None


class ClockSampler:
    """Samples GPU 0's SM clock (MHz) and board power (W) every ``interval_s`` while the
    ``with`` block runs, through NVML or ``nvidia-smi``; samples nothing where neither
    answers (a CPU). Through NVML it also reads the board's energy counter (Volta and
    newer) at the block's start and end.

    NVML's and nvidia-smi's power on recent boards is an average over about a second, so
    :meth:`joules` takes the counter where there is one, else the median power of the
    samples after ``settle_s`` times the block's length."""

    def __init__(self, interval_s: float = 0.05, settle_s: float = 1.0):
        self.interval_s, self.settle_s = interval_s, settle_s
        self.clocks: list[float] = []
        self.powers: list[tuple[float, float]] = []   # (seconds into the block, W)
        self.source = ""
        self.counter_j: tuple[float, float] | None = None
        self._energy: Any = None
        self._begin_j: float | None = None
        self._start = self._end = 0.0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def __enter__(self) -> ClockSampler:
        read = self._reader()
        self._start = time.monotonic()
        self._begin_j = self._energy() if self._energy is not None else None
        if read is not None:
            self._thread = threading.Thread(target=self._run, args=(read,), daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._end = time.monotonic()
        if self._begin_j is not None:
            self.counter_j = (self._begin_j, self._energy())
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def _reader(self) -> Any:
        nvml = _nvml()
        if nvml is not None:
            handle = nvml.nvmlDeviceGetHandleByIndex(0)
            self.source = "NVML"
            self._energy = _energy_counter(nvml, handle)
            return lambda: (float(nvml.nvmlDeviceGetClockInfo(handle, nvml.NVML_CLOCK_SM)),
                            nvml.nvmlDeviceGetPowerUsage(handle) / 1000.0)
        if _smi("clocks.sm"):
            self.source = "nvidia-smi"
            return lambda: tuple(float(v) for v in _smi("clocks.sm,power.draw")[:2])
        return None

    def _run(self, read: Any) -> None:
        while not self._stop.is_set():
            try:
                clock, power = read()
            except (ValueError, TypeError, OSError):
                clock, power = None, None
            if clock:
                self.clocks.append(clock)
            if power:
                self.powers.append((time.monotonic() - self._start, power))
            time.sleep(self.interval_s)

    @property
    def seconds(self) -> float:
        """The block's length, once it has ended."""
        return self._end - self._start

    @property
    def has_counter(self) -> bool:
        """Whether the board's energy counter is read (known once the block has begun)."""
        return self._energy is not None

    def seconds_so_far(self) -> float:
        return time.monotonic() - self._start

    def steady_power_w(self) -> float | None:
        """The median power sampled after the first ``settle_s`` (all samples where the
        block was shorter); None where none was sampled."""
        settled = [w for at, w in self.powers if at >= self.settle_s] or \
            [w for _, w in self.powers]
        return statistics.median(settled) if settled else None

    def joules(self) -> tuple[float, str] | None:
        """The energy the board drew over the block, and how it was found; None where
        neither the counter nor a power sample answered."""
        if self.counter_j is not None and self.counter_j[1] > self.counter_j[0]:
            return self.counter_j[1] - self.counter_j[0], "NVML energy counter"
        power = self.steady_power_w()
        if power is None:
            return None
        return power * self.seconds, f"median {self.source} power x time"

    def summary(self) -> dict[str, Any]:
        if not self.clocks:
            return {"samples": 0, "source": self.source or "none: no NVML or nvidia-smi"}
        return {"samples": len(self.clocks), "source": self.source,
                "sm_mhz_median": statistics.median(self.clocks),
                "sm_mhz_min": min(self.clocks), "sm_mhz_max": max(self.clocks),
                "power_w_median": self.steady_power_w()}


def _energy_counter(nvml: Any, handle: Any) -> Any:
    """A reader of the board's energy counter in joules, or None where the board has none
    (older than Volta) or the driver refuses it."""
    try:
        nvml.nvmlDeviceGetTotalEnergyConsumption(handle)
    except Exception:   # NVMLError_NotSupported and kin: sampled power stands in
        return None
    return lambda: nvml.nvmlDeviceGetTotalEnergyConsumption(handle) / 1000.0
