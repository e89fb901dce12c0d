"""Memory and hygiene of what a ``torch.autograd.Function`` keeps: DB110 and DB111 (opt-in).

- DB110: ``ctx.<attr> = t`` keeps a tensor (an input, an output, a mask, a
  buffer) as a ctx attribute. ``ctx.save_for_backward`` is what autograd's
  version check, ``saved_tensors_hooks``, activation checkpointing and
  offloading see; an attribute bypasses them all, and an output kept this way
  is a reference cycle (output -> grad_fn -> ctx -> output) that leaks memory.
  An intermediate that DB100/DB101 reports at the same place is left to them.
- DB111: a tensor given to ``ctx.save_for_backward`` whose backward reads only
  its metadata (``.shape``, ``.dtype``, ``.size(0)``, ``.numel()``): the whole
  tensor stays alive until backward for a few numbers.

Both read what the forward analysis (:mod:`transpiler.lint.ctx.forward`)
found; DB111 reads backward's unpacking of ``ctx.saved_tensors`` and stays
silent wherever the saved position or a use is not statically plain.
"""
from __future__ import annotations

import ast
from dataclasses import dataclass

from transpiler import codes
from transpiler.lint.ctx.finding import Finding
from transpiler.lint.ctx.forward import ForwardAnalysis
from transpiler.lint.ctx.values import Role, flatten, is_tensor

# What backward may read of a saved tensor without its values (attribute -> metadata read).
METADATA_ATTRIBUTES = frozenset({"shape", "dtype", "device", "ndim", "layout", "is_cuda", "is_sparse",
                                 "is_quantized", "is_meta", "itemsize"})
METADATA_METHODS = frozenset({"size", "dim", "numel", "stride", "ndimension", "nelement", "element_size",
                              "get_device", "is_contiguous", "is_floating_point", "is_complex"})
SAVED_TENSORS = ("saved_tensors", "saved_variables")

# The fixes, described (``--format json``): set by the runner where the fix's plan succeeds
# (:func:`transpiler.lint.function_fix.describe_fixes`), not here, where libcst is not run.
ATTRIBUTE_FIX = "unsafe (--unsafe-fixes): keep it with ctx.save_for_backward and read it from ctx.saved_tensors"
METADATA_FIX = "safe: keep the metadata on ctx instead of the tensor"


@dataclass(frozen=True)
class SavedUnpacking:
    """How backward unpacks ``ctx.saved_tensors``: one top-level ``a, b = ctx.saved_tensors``."""

    statement: ast.Assign
    names: tuple[str | None, ...]      # the target names by position (None: ``_`` or not a name)


def attribute_findings(analysis: ForwardAnalysis, used: set[str], reported: set[int]):
    """DB110 on each ``ctx.<attr> = value`` whose every value is a tensor backward reads back
    (``used``: attribute names read outside forward); ``reported``: ids of the nodes that
    DB100/DB101 already report."""
    outputs = {(v.site, v.view_site) for v in analysis.returned_values if v.site is not None}
    found = []
    for kept in analysis.kept.values():
        node = kept.node
        if not (isinstance(node, ast.Attribute) and kept.where is None and kept.attribute in used
                and id(node) not in reported and not analysis.frames):
            continue
        held = [v for _, values in kept.arguments for v in flatten(values)]
        if not held or not all(is_tensor(v) and not (v.kind is Role.CONSTANT and v.site is None) for v in held):
            continue
        what = _kind(held[0], outputs)
        found.append(Finding(
            node.lineno, node.col_offset, codes.CTX_ATTRIBUTE_TENSOR.code,
            f"`{ast.unparse(node)} = ...` keeps {what} as a ctx attribute: autograd's check of "
            "in-place changes, saved_tensors_hooks, checkpointing and offloading see only "
            "ctx.save_for_backward" + (", and an output kept this way is a reference cycle that leaks "
                                        "memory" if what == "an output" else "")
            + "; save it with ctx.save_for_backward and read it from ctx.saved_tensors in backward"))
    return found


def _kind(value, outputs) -> str:
    if value.kind is Role.OUTPUT or (value.site is not None and (value.site, value.view_site) in outputs):
        return "an output"
    if value.kind is Role.INPUT:
        return f"the input `{value.name}`"
    verb = "created" if value.kind is Role.CONSTANT else "computed"
    in_this_file = value.site is not None and (len(value.site) == 2 or value.site[2] is None)
    return f"a tensor {verb} at line {value.site[0]}" if in_this_file else "a tensor"


def metadata_findings(keeper: ast.FunctionDef, backward: ast.FunctionDef | None,
                      other_methods: list[ast.FunctionDef]):
    """DB111 on each element of the one ``ctx.save_for_backward(...)`` of ``keeper`` that
    backward only reads the metadata of."""
    if backward is None or any(_reads_saved(m) for m in other_methods):
        return []
    save = single_save(keeper)
    unpacking = saved_unpacking(backward)
    if save is None or unpacking is None or len(unpacking.names) != len(save.args):
        return []
    found = []
    for element, name in zip(save.args, unpacking.names):
        if name is None:
            continue
        reads = metadata_reads(backward, name, unpacking.statement)
        if not reads:
            continue
        shown = ", ".join(f"`{r}`" for r in dict.fromkeys(ast.unparse(r) for r in reads))
        found.append(Finding(
            element.lineno, element.col_offset, codes.METADATA_ONLY_SAVE.code,
            f"ctx.save_for_backward keeps `{ast.unparse(element)}` whole, but backward reads only its "
            f"metadata ({shown}): the tensor stays in memory until backward for nothing; keep the "
            "metadata on ctx instead"))
    return found


def single_save(keeper: ast.FunctionDef) -> ast.Call | None:
    """The one ``ctx.save_for_backward(a, b)`` of ``keeper`` (a top-level statement, no starred
    argument), or None."""
    calls = [n for n in ast.walk(keeper) if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
             and n.func.attr == "save_for_backward"]
    if len(calls) != 1 or any(isinstance(a, ast.Starred) for a in calls[0].args) or calls[0].keywords:
        return None
    top = [s.value for s in keeper.body if isinstance(s, ast.Expr)]
    return calls[0] if any(c is calls[0] for c in top) else None


def saved_unpacking(backward: ast.FunctionDef) -> SavedUnpacking | None:
    """Backward's one top-level ``a, b = ctx.saved_tensors``, when it reads saved tensors nowhere else."""
    ctx = _first_parameter(backward)
    unpackings = [s for s in backward.body if isinstance(s, ast.Assign) and len(s.targets) == 1
                  and isinstance(s.targets[0], (ast.Tuple, ast.List)) and _is_saved_tensors(s.value, ctx)]
    reads = [n for n in ast.walk(backward) if isinstance(n, ast.Attribute) and n.attr in SAVED_TENSORS]
    if len(unpackings) != 1 or len(reads) != 1:
        return None
    target = unpackings[0].targets[0]
    if any(isinstance(e, ast.Starred) for e in target.elts):
        return None
    names = tuple(e.id if isinstance(e, ast.Name) and e.id != "_" else None for e in target.elts)
    return SavedUnpacking(unpackings[0], names)


def metadata_reads(backward: ast.FunctionDef, name: str, unpacking: ast.Assign) -> list[ast.expr]:
    """The metadata reads of ``name`` in ``backward`` (``name.shape``, ``name.size(0)``) when
    these are all its uses and it is bound only by ``unpacking``; [] otherwise."""
    parents = {child: parent for parent in ast.walk(backward) for child in ast.iter_child_nodes(parent)}
    reads: list[ast.expr] = []
    for node in ast.walk(backward):
        if isinstance(node, ast.arg) and node.arg == name:
            return []
        if not (isinstance(node, ast.Name) and node.id == name):
            continue
        if not isinstance(node.ctx, ast.Load):
            if parents.get(node) is unpacking.targets[0]:
                continue
            return []
        parent = parents.get(node)
        if isinstance(parent, ast.Attribute) and parent.attr in METADATA_ATTRIBUTES:
            reads.append(parent)
        elif isinstance(parent, ast.Attribute) and parent.attr in METADATA_METHODS \
                and isinstance(parents.get(parent), ast.Call) and parents[parent].func is parent:
            reads.append(parents[parent])
        else:
            return []
    return reads


def _reads_saved(method: ast.FunctionDef) -> bool:
    return any(isinstance(n, ast.Attribute) and n.attr in SAVED_TENSORS for n in ast.walk(method))


def _is_saved_tensors(node: ast.expr, ctx: str | None) -> bool:
    return isinstance(node, ast.Attribute) and node.attr in SAVED_TENSORS and isinstance(node.value, ast.Name) \
        and node.value.id == ctx


def _first_parameter(function: ast.FunctionDef) -> str | None:
    """The ctx parameter (after ``cls`` of a classmethod)."""
    positional = [*function.args.posonlyargs, *function.args.args]
    classmethod = any(ast.unparse(d).rpartition(".")[2] == "classmethod" for d in function.decorator_list)
    if classmethod or (len(positional) >= 2 and positional[0].arg in ("cls", "klass")):
        positional = positional[1:]
    return positional[0].arg if positional else None
