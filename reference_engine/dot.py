"""Pictures of the graph: ``to_dot(tensor)`` gives Graphviz DOT text, ``render(tensor, path)``
writes it as SVG, PNG or PDF with Graphviz's ``dot`` program.

A node's box names its ``grad_fn`` class and operator (``MulTensorBackward0``,
``mul.Tensor``) and the shape and dtype of each output it computed (read from
the nodes that consumed them); a leaf's box (``AccumulateGrad``) shows its
name, when given, shape and dtype; values and gradients of the output and the
leaves are shown on request, like micrograd's ``draw_dot``. In a notebook, the DOT text
``to_dot`` returns is shown as the picture (:class:`Dot`).
"""
from __future__ import annotations

import shutil
import subprocess
import warnings
from pathlib import Path
from typing import Mapping

import numpy as np

from reference_engine.dtypes import from_numpy
from reference_engine.graph import Node
from reference_engine.tensor import Tensor

_FORMATS = ("svg", "png", "pdf")


def _meta(shape: tuple, dtype: np.dtype) -> str:
    return f"{tuple(shape)} {from_numpy(np.dtype(dtype)).name}"


def _values(label: str, array: np.ndarray) -> str:
    return f"{label} " + np.array2string(np.asarray(array), precision=4, threshold=6, edgeitems=2,
                                         separator=", ").replace("\n", "")


def _quote(lines: list[str]) -> str:
    escaped = (line.replace("\\", "\\\\").replace('"', '\\"') for line in lines)
    return '"' + "\\n".join(escaped) + '"'


def _tensor_lines(t: Tensor, title: str, show_values: bool, show_grads: bool) -> list[str]:
    lines = [title, _meta(t.shape, t._data.dtype)]
    if show_values:
        lines.append(_values("data", t._data))
    if show_grads and t.grad is not None:
        lines.append(_values("grad", t.grad._data))
    return lines


_NO_GRAPHVIZ = ("Graphviz's `dot` program, which is not on PATH: install Graphviz (apt-get install graphviz, "
                "brew install graphviz or conda install graphviz)")


class Dot(str):
    """DOT text (a ``str``) that a notebook shows as a picture: ``_repr_svg_`` and ``_repr_png_``
    run Graphviz's ``dot``; without it they warn in one line and return None, so the notebook
    shows the text."""

    __slots__ = ()

    def _picture(self, fmt: str) -> bytes | None:
        program = shutil.which("dot")
        if program is None:
            warnings.warn(f"showing the graph needs {_NO_GRAPHVIZ}; the DOT text is shown instead", stacklevel=3)
            return None
        done = subprocess.run([program, f"-T{fmt}"], input=self.encode(), capture_output=True, check=False)
        if done.returncode != 0:
            raise RuntimeError(f"dot -T{fmt} failed: {done.stderr.decode(errors='replace').strip()}")
        return done.stdout

    def _repr_svg_(self) -> str | None:
        picture = self._picture("svg")
        return None if picture is None else picture.decode()

    def _repr_png_(self) -> bytes | None:
        return self._picture("png")


def to_dot(tensor: Tensor, name: str = "output", *, params: Mapping[str, Tensor] | None = None,
           show_values: bool = False, show_grads: bool = False) -> Dot:
    """The graph that computed ``tensor``, as DOT: one box per node (class, operator, output
    shapes and dtypes), leaves as ``AccumulateGrad`` boxes named from ``params`` (name ->
    tensor), an edge from each node to the nodes its gradients flow into. ``show_values``
    and ``show_grads`` add the data and ``.grad`` of the output and the leaves."""
    names = {id(t): n for n, t in (params or {}).items()}
    ids: dict[int, str] = {}

    def ident(obj: object) -> str:
        return ids.setdefault(id(obj), f"n{len(ids)}")

    ident(tensor)
    nodes: list[Node] = []
    outputs: dict[int, dict[int, str]] = {}       # id(node) -> output number -> "shape dtype"
    edges: list[str] = []
    leaves: list[Tensor] = []
    root = tensor.grad_fn
    if root is not None:
        outputs[id(root)] = {tensor._output_nr: _meta(tensor.shape, tensor._data.dtype)}
        nodes.append(root)
        seen = {id(root)}
        for node in nodes:      # grows while it is walked: breadth first
            for (target_and_nr, meta) in zip(node.next_edges, node.input_meta):
                if target_and_nr is None:
                    continue
                target, output_nr = target_and_nr
                if isinstance(target, Tensor):
                    edges.append(f"  {ident(node)} -> {ident(target)};")
                    if id(target) not in seen:
                        leaves.append(target)
                else:
                    multi = target.num_outputs > 1
                    label = f" [label={_quote([str(output_nr)])}]" if multi else ""
                    edges.append(f"  {ident(node)} -> {ident(target)}{label};")
                    outputs.setdefault(id(target), {})[output_nr] = _meta(*meta)
                    if id(target) not in seen:
                        nodes.append(target)
                seen.add(id(target))
    lines = ["digraph autograd {", '  node [shape=box, fontname="monospace"];',
             f"  {ident(tensor)} [label={_quote(_tensor_lines(tensor, name, show_values, show_grads))}, "
             f"shape=ellipse];"]
    if root is not None:
        lines.append(f"  {ident(tensor)} -> {ident(root)};")
    for node in nodes:
        label = [node.name()]
        overload = getattr(node, "overload", None)
        if overload is not None:
            label.append(overload.name)
        produced = outputs.get(id(node), {})
        for nr in sorted(produced):
            label.append(f"-> {produced[nr]}" if node.num_outputs == 1 else f"-> {nr}: {produced[nr]}")
        lines.append(f"  {ident(node)} [label={_quote(label)}];")
    for leaf in leaves:
        title = "AccumulateGrad" + (f" {names[id(leaf)]}" if id(leaf) in names else "")
        lines.append(f"  {ident(leaf)} [label={_quote(_tensor_lines(leaf, title, show_values, show_grads))}, "
                     f"style=filled, fillcolor=lightblue];")
    lines.extend(edges)
    lines.append("}")
    return Dot("\n".join(lines) + "\n")


def render(tensor: Tensor, path: str | Path, name: str = "output", *,
           params: Mapping[str, Tensor] | None = None, show_values: bool = False,
           show_grads: bool = False) -> Path:
    """Write the graph of :func:`to_dot` to ``path`` (``.svg``, ``.png`` or ``.pdf``) with
    Graphviz's ``dot`` program; a RuntimeError says what to install when it is missing."""
    path = Path(path)
    fmt = path.suffix.lstrip(".").lower()
    if fmt not in _FORMATS:
        raise ValueError(f"render: cannot tell the format from '{path.name}'; name the file "
                         f"{' or '.join('.' + f for f in _FORMATS)}")
    program = shutil.which("dot")
    if program is None:
        raise RuntimeError(f"render needs {_NO_GRAPHVIZ}; engine.to_dot(tensor) gives the DOT text without it")
    text = to_dot(tensor, name, params=params, show_values=show_values, show_grads=show_grads)
    done = subprocess.run([program, f"-T{fmt}", "-o", str(path)], input=text.encode(), capture_output=True)
    if done.returncode != 0:
        raise RuntimeError(f"dot -T{fmt} failed: {done.stderr.decode(errors='replace').strip()}")
    return path
