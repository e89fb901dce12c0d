"""The dialect beyond the shipped library, compiled: tests/cpp/dialect/features.py through
``transpile`` and the build, then gradcheck/gradgradcheck and torch's own gradients."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.cpp.compiled import REPO, build_library
from transpiler.cpp import generate

pytest.importorskip("torch")

FEATURES = Path(__file__).resolve().parent / "dialect"


@pytest.fixture(scope="module")
def generated(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("dialect") / "out_cpp"
    assert generate.main(["--formulas", str(FEATURES), "--out", str(out)]) == 0
    return out


def test_metadata_only_tensor_saves_its_metadata(generated):
    source = (generated / "features.cpp").read_text()
    node = source[source.index("struct MeanAllBackward0"):source.index("namespace backwards {\nat::Tensor mean_all(")]
    assert "int64_t self_numel_" in node and "std::vector<int64_t> self_sizes_" in node
    assert "torch::autograd::SavedVariable" not in node
    assert "at::Tensor mean_all(\n    at::Tensor grad," in source      # rebound in the body: by value


def test_optional_and_list_inputs_are_saved(generated):
    source = (generated / "features.cpp").read_text()
    assert "const at::Tensor y = y_opt.value_or(at::Tensor());" in source
    assert "grad_fn->weights_ = formulas::runtime::to_owned(weights);" in source
    # a rebound input is a local copy; the node's edges still go to the dispatcher's argument
    assert "std::vector<at::Tensor> tensors = formulas::runtime::to_owned(tensors_arg);" in source
    assert "torch::autograd::collect_next_edges(tensors_arg)" in source
    helpers = (generated / "helpers.cpp").read_text()
    assert "return formulas::runtime::to_owned(sizes);" in helpers     # a borrowed view is copied to return it


CHECKS = r"""
import sys, torch
torch.ops.load_library(sys.argv[1])
ops = torch.ops.dialect
gradcheck, gradgradcheck = torch.autograd.gradcheck, torch.autograd.gradgradcheck
def leaf(*shape):
    return torch.randn(*shape, dtype=torch.float64, requires_grad=True)
x, y, m = leaf(3, 4), leaf(3, 4), leaf(2, 3, 4)
scale = leaf(4)
checks = {
    "axpy": (lambda a, b: ops.axpy(a, b, 2.5), (x, y)),
    "axpy_no_y": (lambda a: ops.axpy(a, None, -1.5), (x,)),
    "moments": (lambda a: ops.moments(a, [0, 2]), (m,)),
    "moments_total_only": (lambda a: ops.moments(a, [1])[0], (m,)),
    "moments_squares_only": (lambda a: ops.moments(a, [1])[1], (m,)),
    "weighted_sum": (lambda a, b: ops.weighted_sum([a, b], [0.5, -2.0]), (x, y)),
    "rowscale": (ops.rowscale, (m, scale)),
    "mean_all": (ops.mean_all, (m,)),
}
for name, (fn, inputs) in checks.items():
    print(name, gradcheck(fn, inputs, raise_exception=False), gradgradcheck(fn, inputs, raise_exception=False))
total, squares = ops.moments(m, [0, 2])
expected_total, expected_squares = m.sum([0, 2], keepdim=True), (m * m).sum([0, 2], keepdim=True)
print("moments_values", torch.allclose(total, expected_total) and torch.allclose(squares, expected_squares))
print("node", ops.weighted_sum([x, y], [1.0, 1.0]).grad_fn.name())
for name, (fn, inputs) in checks.items():
    if name != "mean_all":
        print("forward", name, gradcheck(fn, inputs, check_forward_ad=True, raise_exception=False))
import torch.autograd.forward_ad as fwAD
with fwAD.dual_level():
    try:
        ops.mean_all(fwAD.make_dual(m.detach(), torch.ones_like(m)))
        print("no_jvp raised nothing")
    except NotImplementedError as error:
        print("no_jvp", str(error).splitlines()[0])
from torch._dynamo import compiled_autograd
for name, (fn, inputs) in checks.items():
    upstream = torch.randn_like(fn(*inputs)[0] if isinstance(fn(*inputs), tuple) else fn(*inputs))
    def loss():
        out = fn(*inputs)
        return ((out[0] if isinstance(out, tuple) else out) * upstream).sum()
    eager = torch.autograd.grad(loss(), inputs)
    with compiled_autograd._enable(lambda graph: graph):
        compiled = torch.autograd.grad(loss(), inputs)
    print("compiled_autograd", name, all(torch.equal(a, b) for a, b in zip(eager, compiled)))
"""


def test_features_compile_and_pass_gradcheck(generated):
    library = build_library(generated, REPO / "build", "dialect_formulas")
    # A fresh process (as a user would run it): the package registers as torch.ops.dialect.
    done = subprocess.run([sys.executable, "-c", CHECKS, str(library)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stdout.splitlines()
    backward = [line for line in lines if line.split()[0] not in ("node", "moments_values", "forward", "no_jvp",
                                                                    "compiled_autograd")]
    assert [line for line in backward if line.split()[1:] != ["True", "True"]] == []
    assert [line for line in lines if line.startswith(("forward", "compiled_autograd")) and not line.endswith("True")] == []
    assert len([line for line in lines if line.startswith("forward")]) == 7
    assert len([line for line in lines if line.startswith("compiled_autograd")]) == 8
    assert "no_jvp Trying to use forward AD with mean_all that does not support it because its formula defines " \
           "no jvp; add a nested `def jvp(...)` (or @derivative(..., jvp=\"auto_linear\" / \"auto_element_wise\")) " \
           "to the formula" in lines
    assert "moments_values True" in lines
    assert "node WeightedSumBackward0" in lines
