"""The program layer: a JAX program compiled by XLA (or a trace of one that ran), read into
ops with FLOPs and bytes. Holds the XLA adapter, the HLO reader and cost rules, the
xplane trace reader and capture, the workload families and the ops-table reader.
"""
