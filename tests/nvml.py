"""A stand-in for pynvml on a board drawing a constant power, for the code that reads a
GPU's clock, power and energy (roofline.hardware.gpu_facts) without a GPU."""

import time


class ConstantBoard:
    """pynvml on a board at ``watts`` and 1980 MHz: its energy counter (mJ) runs at
    ``watts`` joules per second of the monotonic clock; its power reads ``watts`` (mW)."""

    NVML_CLOCK_SM = 0

    def __init__(self, watts: float):
        self.watts = watts

    def nvmlDeviceGetHandleByIndex(self, index):
        return index

    def nvmlDeviceGetClockInfo(self, handle, clock):
        return 1980

    def nvmlDeviceGetPowerUsage(self, handle):
        return int(self.watts * 1000)

    def nvmlDeviceGetTotalEnergyConsumption(self, handle):
        return int(time.monotonic() * self.watts * 1000)
