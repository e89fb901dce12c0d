"""How OpInfo samples become cases (tests/opinfo_cases.py): which overload a sample calls decides.

Each row is a stand-in OpInfo (name, op, samples) for a declared schema, and
either the arguments of the case it must give or the reason it must be dropped.
"""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
import torch
from torch.testing._internal.opinfo.core import SampleInput

from tests.opinfo_cases import MAX_CASES_PER_OPINFO, _cases_of, catalogue

X = torch.arange(6, dtype=torch.float64).reshape(2, 3) / 7 + 0.1
Y = torch.linspace(-1, 1, 6, dtype=torch.float64).reshape(2, 3)
CONDITION = torch.tensor([[True, False, True], [False, True, False]])


def _opinfo(name: str, op, samples: list[SampleInput]) -> SimpleNamespace:
    return SimpleNamespace(name=name, aten_name=name, variant_test_name="", op=op,
                           supported_dtypes=lambda device: {torch.float64, torch.float32},
                           sample_inputs_func=lambda info, device, dtype, requires_grad: iter(samples))


MAPPED = [
    # a lambda that reorders the arguments: the recorded ATen call has the schema's order
    ("where.self", "where.self(Tensor condition, Tensor self, Tensor other) -> Tensor",
     _opinfo("where", lambda x, c, y: torch.where(c, x, y), [SampleInput(X, args=(CONDITION, Y))]),
     (CONDITION, X, Y), {}),
    # a composite that calls the declared overload (OPINFO_NAMES: softmax -> _softmax)
    ("_softmax", "_softmax(Tensor self, int dim, bool half_to_float) -> Tensor",
     _opinfo("softmax", torch.softmax, [SampleInput(X, args=(1,))]), (X, 1, False), {}),
    # a declared composite that runs as another op (reshape as view): bound onto the schema
    ("reshape", "reshape(Tensor(a) self, SymInt[] shape) -> Tensor(a)",
     _opinfo("reshape", torch.reshape, [SampleInput(X, args=((3, 2),))]), (X, [3, 2]), {}),
    # keywords given out of order become positions; keyword-only ones stay keywords
    ("sum.dim_IntList", "sum.dim_IntList(Tensor self, int[1]? dim, bool keepdim=False, *, ScalarType? dtype=None) -> Tensor",
     _opinfo("sum", torch.sum, [SampleInput(X, kwargs={"keepdim": True, "dim": 1, "dtype": torch.float64})]),
     (X, [1], True), {"dtype": np.float64}),
]


@pytest.mark.parametrize("op,schema,info,args,kwargs", MAPPED, ids=[row[0] for row in MAPPED])
def test_sample_becomes_a_case_of_the_overload_it_calls(op, schema, info, args, kwargs):
    cases, dropped = _cases_of(op, schema, [info])
    assert dropped == []
    (case,) = cases
    assert case.op == op and case.opinfo == info.name
    assert len(case.args) == len(args)
    for got, expected in zip(case.args, args):
        if isinstance(expected, torch.Tensor):
            assert isinstance(got, np.ndarray) and got.dtype == expected.numpy().dtype
            np.testing.assert_array_equal(got, expected.detach().numpy())
        else:
            assert got == expected
    assert case.kwargs == kwargs
    assert case.differentiable == tuple(i for i, a in enumerate(args)
                                        if isinstance(a, torch.Tensor) and a.dtype == torch.float64)


DROPPED = [
    # torch.add(x, 2.0) calls add.Tensor with a wrapped Python number where the schema wants a Tensor
    ("add.Tensor", "add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor",
     _opinfo("add", torch.add, [SampleInput(X, args=(2.0,))]),
     "calls aten.add.Tensor with arguments (Tensor, float) its declared schema does not take"),
    # a composite that calls the declared overload on a tensor it computed first
    ("mul.Tensor", "mul.Tensor(Tensor self, Tensor other) -> Tensor",
     _opinfo("mul", lambda x, y: torch.mul(x, y.neg()), [SampleInput(X, args=(Y,))]),
     "calls aten.neg.default, aten.mul.Tensor, not aten.mul.Tensor"),
    # the declared overload is not what the sample reaches
    ("sum", "sum(Tensor self, *, ScalarType? dtype=None) -> Tensor",
     _opinfo("sum", torch.sum, [SampleInput(X, args=(1,))]), "calls aten.sum.dim_IntList, not aten.sum.default"),
    # the arguments bind, but the OpInfo's op computes something else with them
    ("permute", "permute(Tensor(a) self, int[] dims) -> Tensor(a)",
     _opinfo("permute", lambda x, dims: torch.permute(x, dims) * 2, [SampleInput(X, args=((1, 0),))]),
     "computes something else than the OpInfo's op"),
    # a rival overload takes the same arguments: torch need not pick ours
    ("var_mean.dim", "var_mean.dim(Tensor self, int[1]? dim, bool unbiased=True, bool keepdim=False) -> (Tensor, Tensor)",
     _opinfo("var_mean", torch.var_mean, [SampleInput(X, kwargs={"dim": 1})]),
     "binds to var_mean.dim and also to var_mean.correction"),
    # a dtype the catalogue's conventions do not have
    ("gather", "gather(Tensor self, int dim, Tensor index, *, bool sparse_grad=False) -> Tensor",
     _opinfo("gather", torch.gather, [SampleInput(X, args=(1, torch.tensor([[0], [2]], dtype=torch.int32)))]),
     "a torch.int32 tensor"),
    ("sin", "sin(Tensor self) -> Tensor", _opinfo("sin", torch.sin, [SampleInput(X.to(torch.float32))]),
     "a torch.float32 tensor"),
]


@pytest.mark.parametrize("op,schema,info,reason", DROPPED, ids=[row[0] for row in DROPPED])
def test_sample_that_does_not_call_the_overload_is_dropped_with_its_reason(op, schema, info, reason):
    cases, dropped = _cases_of(op, schema, [info])
    assert cases == []
    (drop,) = dropped
    assert (drop.op, drop.opinfo, drop.sample) == (op, info.name, 0)
    assert reason in drop.reason


def test_an_opinfo_without_float64_is_dropped():
    info = _opinfo("sin", torch.sin, [SampleInput(X)])
    info.supported_dtypes = lambda device: {torch.float32}
    cases, dropped = _cases_of("sin", "sin(Tensor self) -> Tensor", [info])
    assert cases == [] and [d.reason for d in dropped] == ["no float64 support on CPU"]


def test_cases_per_opinfo_are_capped_in_sample_order():
    samples = [SampleInput(X + i) for i in range(MAX_CASES_PER_OPINFO + 5)]
    cases, _ = _cases_of("sin", "sin(Tensor self) -> Tensor", [_opinfo("sin", torch.sin, samples)])
    assert [c.id for c in cases] == [f"opinfo-sin-{i}" for i in range(MAX_CASES_PER_OPINFO)]


def test_samples_are_the_same_on_every_run():
    def random_samples(info, device, dtype, requires_grad):
        return iter([SampleInput(torch.randn(3, dtype=dtype)) for _ in range(3)])

    info = _opinfo("sin", torch.sin, [])
    info.sample_inputs_func = random_samples
    first, _ = _cases_of("sin", "sin(Tensor self) -> Tensor", [info])
    torch.randn(5)                       # the global generator moves on
    second, _ = _cases_of("sin", "sin(Tensor self) -> Tensor", [info])
    for a, b in zip(first, second, strict=True):
        np.testing.assert_array_equal(a.args[0], b.args[0])


def test_library_cases_have_unique_names_and_respect_the_cap():
    cases = catalogue().cases
    assert cases, "no OpInfo sample reaches any formula of the library"
    names = [case.name for case in cases]
    assert len(names) == len(set(names))
    per_opinfo: dict[tuple[str, str], int] = {}
    for case in cases:
        per_opinfo[case.op, case.opinfo] = per_opinfo.get((case.op, case.opinfo), 0) + 1
    assert max(per_opinfo.values()) <= MAX_CASES_PER_OPINFO
