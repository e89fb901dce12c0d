"""The schema parser agrees with torchgen's own on every schema torch ships."""
from __future__ import annotations

import os

import pytest

from transpiler.schema import ListType, OptionalType, SchemaError, is_index_list, parse_schema

torchgen_model = pytest.importorskip("torchgen.model")
yaml = pytest.importorskip("yaml")


def _native_functions() -> list[str]:
    import torchgen

    path = os.path.join(os.path.dirname(torchgen.__file__), "packaged/ATen/native/native_functions.yaml")
    with open(path) as f:
        return [entry["func"] for entry in yaml.safe_load(f)]


def _structure(schema) -> list[tuple]:
    """A comparable view of torchgen's FunctionSchema."""
    args = schema.arguments
    kw = {a.name for a in args.flat_kwarg_only} | {a.name for a in args.out}
    rows = [(a.name, str(a.type), a.default, str(a.annotation) if a.annotation else None, a.name in kw)
            for a in args.flat_all]
    rets = [(r.name, str(r.type), str(r.annotation) if r.annotation else None) for r in schema.returns]
    return [str(schema.name.name), schema.name.overload_name, rows, rets]


def _our_structure(schema) -> list[tuple]:
    rows = [(a.name, str(a.type), a.default, str(a.annotation) if a.annotation else None, a.kwarg_only)
            for a in schema.arguments]
    rets = [(r.name, str(r.type), str(r.annotation) if r.annotation else None) for r in schema.returns]
    return [schema.name.base, schema.name.overload, rows, rets]


def test_agrees_with_torchgen_on_every_native_function():
    schemas = _native_functions()
    assert len(schemas) > 2000
    mismatches = []
    for text in schemas:
        ours = parse_schema(text)
        theirs = torchgen_model.FunctionSchema.parse(text)
        if str(ours) != str(theirs) or _our_structure(ours) != _structure(theirs):
            mismatches.append(text)
    assert not mismatches, f"{len(mismatches)} schemas disagree, first: {mismatches[:3]}"


def test_typed_model():
    s = parse_schema("sum.dim_IntList(Tensor self, int[1]? dim, bool keepdim=False, *, ScalarType? dtype=None) -> Tensor")
    assert str(s.name) == "sum.dim_IntList"
    dim = s.argument("dim")
    assert isinstance(dim.type, OptionalType) and isinstance(dim.type.elem, ListType)
    assert dim.type.elem.size == 1
    assert [a.name for a in s.kwarg_only] == ["dtype"]
    assert [a.name for a in s.tensor_inputs] == ["self"]


def test_out_and_alias_annotations():
    s = parse_schema("add.out(Tensor self, Tensor other, *, Scalar alpha=1, Tensor(a!) out) -> Tensor(a!)")
    assert [a.name for a in s.out] == ["out"]
    assert [a.name for a in s.tensor_inputs] == ["self", "other"]
    assert str(s.returns[0]) == "Tensor(a!)"


def test_an_index_list_is_tensor_like_but_has_no_gradient_slot():
    s = parse_schema("index_put(Tensor self, Tensor?[] indices, Tensor values, bool accumulate=False) -> Tensor")
    indices = s.argument("indices")
    assert indices.is_tensor_like and is_index_list(indices.type) and not indices.is_differentiable
    assert [a.name for a in s.tensor_inputs] == ["self", "values"]
    assert not is_index_list(parse_schema("cat(Tensor[] tensors, int dim=0) -> Tensor").argument("tensors").type)


@pytest.mark.parametrize("text, fragment", [
    ("sin(Tensor self)", "no '-> returns'"),
    ("sin(Tensr self) -> Tensor", "unknown type 'Tensr'"),
    ("sin(Tensor) -> Tensor", "must be 'Type name'"),
    ("sin(Tensor self, int[x] d) -> Tensor", "list size"),
    ("sin(Tensor self, Tensor self) -> Tensor", "duplicate"),
    ("sin(Tensor self -> Tensor", "must look like"),
])
def test_malformed_schemas_say_what_is_wrong(text, fragment):
    with pytest.raises(SchemaError, match=fragment):
        parse_schema(text)
