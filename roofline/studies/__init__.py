"""Studies over many programs: parameter sweeps, the regression over a sweep, and
validation against measurements.
"""
