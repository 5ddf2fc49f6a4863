"""The op graph: the entry computation's top-level ops as a networkx DiGraph.

Nodes are op names with their :class:`OpCost` under the ``cost`` attribute; an edge
``a -> b`` means ``b`` reads a value ``a`` produced. Later steps walk it: the critical path
under per-op times, and grouping by the JAX source op.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping

import networkx as nx

from roofline.program.hlo.op_cost import ModuleCosts, OpCost


def build_graph(costs: ModuleCosts) -> nx.DiGraph:
    graph = nx.DiGraph(module=costs.module)
    for op in costs.ops:
        graph.add_node(op.name, cost=op)
    for op in costs.ops:
        for operand in op.operands:
            if operand in graph:
                graph.add_edge(operand, op.name)
    return graph


def critical_path(graph: nx.DiGraph, seconds: Mapping[str, float]) -> tuple[float, list[str]]:
    """The longest chain of dependent ops when op ``n`` takes ``seconds[n]`` (0 if absent).

    Returns its total time and the op names along it: the time the program needs even with
    unlimited parallelism across independent ops.
    """
    best: dict[str, tuple[float, str | None]] = {}
    for name in nx.topological_sort(graph):
        own = seconds.get(name, 0.0)
        before = max(((best[p][0], p) for p in graph.predecessors(name)), default=(0.0, None))
        best[name] = (before[0] + own, before[1])
    if not best:
        return 0.0, []
    end = max(best, key=lambda n: best[n][0])
    path, node = [], end
    while node is not None:
        path.append(node)
        node = best[node][1]
    return best[end][0], path[::-1]


def group_by_source(costs: ModuleCosts) -> dict[str, list[OpCost]]:
    """Ops grouped by the JAX operation they came from (metadata ``op_name``)."""
    groups: dict[str, list[OpCost]] = defaultdict(list)
    for op in costs.ops:
        if not op.free:
            groups[op.op_name or "(no source op)"].append(op)
    return dict(groups)
