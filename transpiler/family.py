"""Formula families: one ``@derivative`` body shared by several operators (``formulas.family_member``).

::

    @derivative("minimum(Tensor self, Tensor other) -> Tensor")
    @family_member("maximum(Tensor self, Tensor other) -> Tensor",
                   rename={"minimum": "maximum", "lt": "gt", "gt": "lt"})
    def minimum(self, other):
        ...

The front-end reads such a function as one formula per member, each exactly the formula that
would be written out by hand: :func:`family_members` gives, after the function itself, one
function per ``@family_member`` below its ``@derivative``, with

- every identifier of ``rename`` replaced in the parameters and the body (operators, locals,
  parameters, the attribute after ``at.``), keyword names at call sites (``f(dim=...)``), the
  template's parameter defaults and string literals left as they are (what
  ``formulas.dsl.FamilyMember.function`` does to the code at run time);
- the parameter defaults of ``defaults`` put in;
- the member's name (its operator, ``max.dim`` -> ``max_dim``) and, in place of the family's
  ``@derivative``, one with the member's schema and the family's other arguments.

The new nodes are returned with the original node each stands for, so that positions, and so
diagnostics, point into the family's source. Nothing is imported or run.
"""
from __future__ import annotations

from collections.abc import Mapping

import libcst as cst

from transpiler.dataflow import dotted_name

MEMBER = "family_member"
#: Names the front-end looks for in a formula: a family may not rename them.
RESERVED = frozenset({"backward", "jvp", "needs_input_grad"})


class MalformedMember(Exception):
    """A ``@family_member`` that cannot be read (DB107 at ``node``)."""

    def __init__(self, node: cst.CSTNode, message: str) -> None:
        super().__init__(message)
        self.node = node
        self.message = message


Member = tuple[cst.FunctionDef, cst.Decorator]     # a member's function and its ``@derivative``


def family_members(function: cst.FunctionDef, derivative: cst.Decorator
                   ) -> tuple[tuple[Member, ...], dict[cst.CSTNode, cst.CSTNode]]:
    """``function`` (decorated ``derivative``) and one function per ``@family_member`` of it, in source
    order; with each new node mapped to the node of the source it stands for."""
    members_found = [(i, d) for i, d in enumerate(function.decorators) if _is_member(d)]
    if not members_found:
        return ((function, derivative),), {}
    below = function.decorators.index(derivative)
    origins: dict[cst.CSTNode, cst.CSTNode] = {}
    members: list[Member] = [(function, derivative)]
    for index, decorator in members_found:
        if index < below:
            raise MalformedMember(decorator, "@family_member sits above @derivative; put it below the @derivative "
                                   "of the family's body, whose arguments every member shares")
        members.append(_member(function, derivative, decorator, origins))
    return tuple(members), origins


def stray_member(function: cst.FunctionDef) -> cst.Decorator | None:
    """A ``@family_member`` of a function without ``@derivative`` (it declares nothing)."""
    return next((d for d in function.decorators if _is_member(d)), None)


def _is_member(decorator: cst.Decorator) -> bool:
    target = decorator.decorator.func if isinstance(decorator.decorator, cst.Call) else decorator.decorator
    name = dotted_name(target)
    return name is not None and name.rsplit(".", 1)[-1] == MEMBER


def _member(function: cst.FunctionDef, derivative: cst.Decorator, decorator: cst.Decorator,
            origins: dict[cst.CSTNode, cst.CSTNode]) -> Member:
    schema, rename, defaults = _member_arguments(decorator)
    params = _with_defaults(function.params.visit(_Renamer(rename, origins, own_params=True)), defaults, origins)
    body = function.body.visit(_Renamer(rename, origins, own_params=False))
    name = schema.evaluated_value.split("(", 1)[0].strip().replace(".", "_").lower()
    call = derivative.decorator
    positional = [i for i, a in enumerate(call.args) if a.keyword is None] if isinstance(call, cst.Call) else []
    if not positional:      # no schema: reported as the family's body is read
        return function, derivative
    first = positional[0]
    schema_arg = call.args[first].with_changes(value=schema)
    member_call = call.with_changes(args=(*call.args[:first], schema_arg, *call.args[first + 1:]))
    member_derivative = derivative.with_changes(decorator=member_call)
    origins.update({schema_arg: call.args[first], member_call: decorator.decorator, member_derivative: derivative})
    decorators = tuple(member_derivative if d is derivative else d for d in function.decorators)
    member_name = cst.Name(name)
    member = function.with_changes(name=member_name, params=params, body=body, decorators=decorators)
    origins.update({member_name: function.name, member: function})
    return member, member_derivative


def _member_arguments(decorator: cst.Decorator
                       ) -> tuple[cst.SimpleString | cst.ConcatenatedString, dict[str, str],
                                  dict[str, tuple[cst.BaseExpression, cst.BaseExpression]]]:
    call = decorator.decorator
    usage = ("@family_member(\"name.overload(...) -> ...\", rename={\"old\": \"new\", ...}, "
             "defaults={\"parameter\": value, ...})")
    positional = [a for a in call.args if a.keyword is None] if isinstance(call, cst.Call) else []
    if len(positional) != 1 or not isinstance(positional[0].value, (cst.SimpleString, cst.ConcatenatedString)) \
            or not isinstance(positional[0].value.evaluated_value, str):
        raise MalformedMember(call, f"@family_member takes the member's schema as one string literal: {usage}")
    rename: dict[str, str] = {}
    defaults: dict[str, tuple[cst.BaseExpression, cst.BaseExpression]] = {}
    for arg in call.args:
        if arg.keyword is None:
            continue
        if arg.keyword.value not in ("rename", "defaults") or not isinstance(arg.value, cst.Dict):
            raise MalformedMember(arg, "@family_member takes rename={...} and defaults={...}, dict literals: "
                                  f"{usage}")
        for element in arg.value.elements:
            key = _identifier(element.key) if isinstance(element, cst.DictElement) else None
            if key is None:
                raise MalformedMember(element, f"@family_member's {arg.keyword.value} has string keys that are "
                                       f"identifiers: {usage}")
            if arg.keyword.value == "defaults":
                defaults[key] = (element.key, element.value)
                continue
            value = _identifier(element.value)
            if value is None:
                raise MalformedMember(element.value, f"@family_member renames an identifier to an identifier: {usage}")
            if RESERVED & {key, value}:
                raise MalformedMember(element, f"@family_member may not rename {', '.join(sorted(RESERVED))}: the "
                                       "formula's shape rests on them")
            rename[key] = value
    return positional[0].value, rename, defaults


def _identifier(node: cst.BaseExpression | None) -> str | None:
    if not isinstance(node, cst.SimpleString):
        return None
    value = node.evaluated_value
    return value if isinstance(value, str) and value.isidentifier() else None


def _with_defaults(params: cst.Parameters, defaults: Mapping[str, tuple[cst.BaseExpression, cst.BaseExpression]],
                   origins: dict[cst.CSTNode, cst.CSTNode]) -> cst.Parameters:
    """``params`` with the defaults of ``defaults`` (parameter name -> (key node, value node)) put in."""
    if not defaults:
        return params
    given = {p.name.value: p for p in (*params.params, *params.kwonly_params) if p.default is not None}
    for name, (key, _) in defaults.items():
        if name not in given:
            raise MalformedMember(key, f"@family_member gives a default for `{name}`, which is no parameter with a "
                                   "default (after renaming); give defaults only for parameters that have one")

    def put(param: cst.Param) -> cst.Param:
        if param.name.value not in defaults:
            return param
        changed = param.with_changes(default=defaults[param.name.value][1])
        origins[changed] = origins.get(param, param)
        return changed

    changed = params.with_changes(params=tuple(put(p) for p in params.params),
                                  kwonly_params=tuple(put(p) for p in params.kwonly_params))
    origins[changed] = origins.get(params, params)
    return changed


class _Renamer(cst.CSTTransformer):
    """Replaces the identifiers of ``rename``; keyword names at call sites stay, and with
    ``own_params`` the defaults of the family function's parameters (values its ``def`` evaluated
    once; those of a nested ``def`` are evaluated at each call, so they are renamed). Records each
    new node's original."""

    def __init__(self, rename: Mapping[str, str], origins: dict[cst.CSTNode, cst.CSTNode], own_params: bool) -> None:
        super().__init__()
        self.rename = rename
        self.origins = origins
        self.own_params = own_params

    def on_leave(self, original_node: cst.CSTNode, updated_node: cst.CSTNode):   # type: ignore[override]
        result = super().on_leave(original_node, updated_node)
        if isinstance(result, cst.CSTNode) and result is not original_node:
            self.origins[result] = self.origins.get(original_node, original_node)
        return result

    def leave_Name(self, original_node: cst.Name, updated_node: cst.Name) -> cst.Name:
        new = self.rename.get(updated_node.value)
        return updated_node if new is None else updated_node.with_changes(value=new)

    def leave_Arg(self, original_node: cst.Arg, updated_node: cst.Arg) -> cst.Arg:
        return updated_node.with_changes(keyword=original_node.keyword)

    def leave_Param(self, original_node: cst.Param, updated_node: cst.Param) -> cst.Param:
        return updated_node.with_changes(default=original_node.default) if self.own_params else updated_node
