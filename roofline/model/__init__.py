"""The model layer: ops placed on a device's roofs, and everything computed from placements:
what a program leaves out (coverage), comparisons, what-if, transfer of measured times,
explanations of measured runs.
"""
