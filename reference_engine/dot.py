"""Graph export to Graphviz DOT: ``to_dot(tensor) -> str``."""
from __future__ import annotations

from reference_engine.graph import Node
from reference_engine.tensor import Tensor


def _shape(t: Tensor) -> str:
    return str(tuple(t.shape))


def _quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def to_dot(tensor: Tensor, name: str = "output") -> str:
    """The graph that computed ``tensor``: one box per node, leaves as AccumulateGrad
    boxes, an edge from each node to the nodes its gradients flow into."""
    lines = ["digraph autograd {", '  node [shape=box, fontname="monospace"];']
    ids: dict[int, str] = {}

    def ident(obj: object) -> str:
        key = id(obj)
        if key not in ids:
            ids[key] = f"n{len(ids)}"
        return ids[key]

    root = ident(tensor)
    lines.append(f"  {root} [label={_quote(f'{name} {_shape(tensor)}')}, shape=ellipse];")
    if tensor.grad_fn is None:
        lines.append("}")
        return "\n".join(lines) + "\n"
    lines.append(f"  {root} -> {ident(tensor.grad_fn)};")
    stack: list[Node] = [tensor.grad_fn]
    seen = {id(tensor.grad_fn)}
    while stack:
        node = stack.pop()
        lines.append(f"  {ident(node)} [label={_quote(node.name())}];")
        for edge in node.next_edges:
            if edge is None:
                continue
            target, output_nr = edge
            if isinstance(target, Tensor):
                leaf = ident(target)
                if id(target) not in seen:
                    seen.add(id(target))
                    lines.append(f"  {leaf} [label={_quote(f'AccumulateGrad {_shape(target)}')}, "
                                 f"style=filled, fillcolor=lightblue];")
                lines.append(f"  {ident(node)} -> {leaf};")
                continue
            lines.append(f"  {ident(node)} -> {ident(target)} [label={_quote(str(output_nr))}];")
            if id(target) not in seen:
                seen.add(id(target))
                stack.append(target)
    lines.append("}")
    return "\n".join(lines) + "\n"
