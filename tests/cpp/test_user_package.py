"""A user's own formula package may call the shipped library's operators: it lints,
transpiles (the shipped schemas resolve its calls), compiles and gradchecks."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.cpp.compiled import REPO, build_library
from tests.cpp.test_transpile_cli import GOOD
from transpiler.cpp import generate

torch = pytest.importorskip("torch")

SINH = '''\
from formulas import at, derivative


@derivative("sinh(Tensor self) -> Tensor")
def sinh(self):
    result = at.sinh(self)
    def backward(grad):
        # d/dx sinh(x) = cosh(x) = (e^x + e^-x) / 2
        return grad * (at.exp(self) + at.exp(-self)) / 2
    return result, backward
'''

# Its own sin and cos (torch.ops.myops.sin beside the shipped torch.ops.formulas.sin, written as
# test_transpile_cli's GOOD) and a helper that has a shipped helper's name and C++ signature but
# another meaning: each library must call its own (torch.ops.load_library opens libraries
# RTLD_LOCAL, so neither binds the other's symbol).
TRIG = GOOD.replace("from formulas import at, derivative", "from formulas import Tensor, at, derivative, helper") + '''


@helper
def sum_to(grad: Tensor, sizes: list[int]) -> Tensor:
    """Here: the gradient of doubling (the shipped sum_to undoes broadcasting)."""
    return at.mul(grad, 2.0)


@derivative("twice(Tensor self) -> Tensor")
def twice(self):
    result = at.mul(self, 2.0)
    self_sizes = self.sizes()
    def backward(grad):
        return sum_to(grad, self_sizes)
    return result, backward
'''

CHECK = """
import shutil, sys, torch
from transpiler.build import load_library
shipped, mine, copy = sys.argv[1:]
load_library(shipped)
load_library(mine)
gradcheck, gradgradcheck = torch.autograd.gradcheck, torch.autograd.gradgradcheck
x = torch.linspace(-1.5, 2.0, 7, dtype=torch.float64).reshape(7, 1).expand(7, 3).clone().requires_grad_()
y = torch.linspace(0.5, 1.5, 7, dtype=torch.float64).reshape(7, 1).requires_grad_()
f, m = torch.ops.formulas, torch.ops.myops
ok = all(gradcheck(op, (x,)) and gradgradcheck(op, (x,)) for op in (f.sin, m.sin, m.sinh, m.twice))
(g,) = torch.autograd.grad(m.sinh(x).sum(), x, create_graph=True)
(h,) = torch.autograd.grad(g.sum(), x)
same = torch.allclose(g, torch.cosh(x)) and torch.allclose(h, torch.sinh(x))
same &= torch.equal(m.sin(x), f.sin(x)) and torch.equal(m.twice(x), 2 * x)
(doubled,) = torch.autograd.grad(m.twice(x).sum(), x)                  # the package's own sum_to
(reduced,) = torch.autograd.grad(f.mul(x, y).sum(), y)                  # the shipped sum_to
own_helpers = torch.equal(doubled, torch.full_like(x, 2.0)) and torch.allclose(reduced, x.sum(1, keepdim=True))
shutil.copy(mine, copy)
shutil.copy(mine[:-3] + ".ops", copy[:-3] + ".ops")
try:
    load_library(copy)             # a second copy registers myops::sin again: torch would abort
    refused = "loaded"
except RuntimeError as error:
    refused = all(part in str(error) for part in ("myops::", "already registered", "--namespace"))
print(f"gradchecks={ok} matches_torch={same} own_helpers={own_helpers} refused={refused}")
"""


def test_user_package_loads_beside_the_shipped_library(tmp_path: Path):
    """A package named myops registers torch.ops.myops (its own sin too), builds as myops_ops, and
    loads in one process with the shipped library; loading an operator twice is a clear error."""
    package, out = tmp_path / "myops", tmp_path / "my_cpp"
    package.mkdir()
    (package / "sinh.py").write_text(SINH)
    (package / "trig.py").write_text(TRIG)

    assert generate.main(["--formulas", str(package), "--out", str(out)]) == 0
    assert sorted(p.name for p in out.iterdir() if p.suffix == ".cpp") == ["aten_override.cpp", "helpers.cpp", "sinh.cpp", "trig.cpp"]
    assert "TORCH_LIBRARY_FRAGMENT(myops, m)" in (out / "trig.cpp").read_text()
    library = build_library(out, REPO / "build")
    assert library.name == "myops_ops.so"
    shipped = build_library(REPO / "out_cpp", REPO / "build", "formulas_ops")
    checks = subprocess.run([sys.executable, "-c", CHECK, str(shipped), str(library), str(tmp_path / "copy.so")],
                            capture_output=True, text=True)
    assert checks.returncode == 0, checks.stderr[-3000:]
    assert checks.stdout.split() == ["gradchecks=True", "matches_torch=True", "own_helpers=True", "refused=True"]


def test_the_shipped_namespace_is_refused_for_an_operator_it_registers(tmp_path: Path, capsys):
    package = tmp_path / "myops"
    package.mkdir()
    (package / "trig.py").write_text(TRIG)
    assert generate.main(["--formulas", str(package), "--out", str(tmp_path / "out"), "--namespace", "formulas"]) == 1
    printed = capsys.readouterr().out
    assert "trig.py:4:13: DB206 formulas::sin is registered by the shipped library too" in printed
    assert "trig.py:12:13: DB206 formulas::cos is registered by the shipped library too" in printed
    assert not (tmp_path / "out").exists()


# Calls the shipped helpers by importing them; sum_backward calls wrap_dim and is_reduced_dim in turn.
# A local named like a shipped helper (``unsqueezed_sizes``) shadows it: no copy of that one.
SHIPPED_HELPERS = '''\
from formulas import at, derivative
from formulas.helpers import sum_backward, sum_to


@derivative("plus(Tensor self, Tensor other) -> Tensor")
def plus(self, other):
    result = at.add(self, other)
    self_sizes = self.sizes()
    unsqueezed_sizes = other.sizes()
    def backward(grad):
        return sum_to(grad, self_sizes), sum_backward(grad, unsqueezed_sizes, None, False)
    return result, backward
'''


def test_a_package_calls_the_shipped_helpers_and_gets_its_own_copy(tmp_path: Path, capsys):
    """``from formulas.helpers import sum_to`` lints clean and transpiles: the helpers it calls, and
    the ones those call, are emitted into the package's helpers.cpp (its library links alone)."""
    from transpiler.lint.runner import lint_paths

    package, out = tmp_path / "myops", tmp_path / "my_cpp"
    package.mkdir()
    (package / "plus.py").write_text(SHIPPED_HELPERS)
    assert lint_paths([str(package)]) == []
    assert generate.main(["--formulas", str(package), "--out", str(out)]) == 0
    defined = [line.split("(")[0].split()[-1] for line in (out / "helpers.h").read_text().splitlines()
               if line.endswith(");")]
    assert sorted(defined) == ["is_reduced_dim", "sum_backward", "sum_to", "wrap_dim"]
    assert "helpers::sum_backward(grad, unsqueezed_sizes" in (out / "plus.cpp").read_text()


# A schema argument named like a Python keyword is the parameter `from_` of the formula (DESIGN §2).
KEYWORD_ARGUMENT = '''\
from formulas import at, derivative


@derivative("scaled_range(Tensor self, int from, int to) -> Tensor")
def scaled_range(self, from_, to):
    result = at.mul(self, to - from_)
    def backward(grad):
        return grad * (to - from_)
    return result, backward
'''

KEYWORD_CHECK = """
import sys, torch
from transpiler.build import load_library
load_library(sys.argv[1])
op = torch.ops.kwops.scaled_range
x = torch.linspace(-1.0, 1.0, 5, dtype=torch.float64, requires_grad=True)
ok = torch.autograd.gradcheck(lambda t: op(t, 2, 5), (x,)) and torch.autograd.gradgradcheck(lambda t: op(t, 2, 5), (x,))
(g,) = torch.autograd.grad(op(x, **{"from": 2, "to": 5}).sum(), x)
print(f"gradchecks={ok} grad={torch.equal(g, torch.full_like(x, 3.0))} schema={op.default._schema}")
"""


def test_an_argument_named_like_a_python_keyword(tmp_path: Path):
    """``int from`` is the parameter ``from_``: it lints, transpiles (no internal error), keeps the
    schema's name for callers, compiles and gradchecks."""
    from transpiler.lint.runner import lint_paths

    package, out = tmp_path / "kwops", tmp_path / "kw_cpp"
    package.mkdir()
    (package / "scaled.py").write_text(KEYWORD_ARGUMENT)
    assert lint_paths([str(package)]) == []
    assert generate.main(["--formulas", str(package), "--out", str(out)]) == 0
    library = build_library(out, REPO / "build")
    checks = subprocess.run([sys.executable, "-c", KEYWORD_CHECK, str(library)], cwd=REPO, capture_output=True, text=True)
    assert checks.returncode == 0, checks.stderr[-3000:]
    assert checks.stdout.split(" schema=")[0].split() == ["gradchecks=True", "grad=True"]
    assert "int from, int to" in checks.stdout


# A literal None or [] for a helper's optional list parameter, given or by default (``None`` and
# ``[]`` differ: the helper branches on ``is None``).
OPTIONAL_LIST_ARGUMENT = '''\
from formulas import at, derivative, helper


@helper
def dims_weight(dims: list[int] | None = None) -> float:
    """2 for None; 3 plus one per listed dim otherwise."""
    weight = 2.0
    if dims is not None:
        weight = 3.0
        for d in dims:
            weight = weight + 1.0
    return weight


@derivative("dims_scaled(Tensor self) -> Tensor")
def dims_scaled(self):
    scale = dims_weight(None) + dims_weight([]) * 10.0 + dims_weight() * 100.0 + dims_weight([0, 1]) * 1000.0
    result = at.mul(self, scale)
    def backward(grad):
        return grad * scale
    return result, backward
'''

OPTIONAL_LIST_CHECK = """
import sys, torch
from transpiler.build import load_library
load_library(sys.argv[1])
op = torch.ops.optops.dims_scaled
x = torch.linspace(-1.0, 1.0, 5, dtype=torch.float64, requires_grad=True)
ok = torch.autograd.gradcheck(op, (x,)) and torch.autograd.gradgradcheck(op, (x,))
(g,) = torch.autograd.grad(op(x).sum(), x)
print(f"gradchecks={ok} grad={torch.equal(g, torch.full_like(x, 5232.0))}")
"""


def test_a_literal_none_or_empty_list_for_a_helpers_optional_list(tmp_path: Path):
    """``dims_weight(None)``, ``dims_weight([])`` and ``dims_weight()`` compile (a ``std::optional``
    of a vector does not convert to the ``at::OptionalIntArrayRef`` parameter) and keep Python's
    meaning: None is not the empty list (2 + 10 * 3 + 100 * 2 + 1000 * 5 = 5232)."""
    from transpiler.lint.runner import lint_paths

    package, out = tmp_path / "optops", tmp_path / "opt_cpp"
    package.mkdir()
    (package / "scaled.py").write_text(OPTIONAL_LIST_ARGUMENT)
    assert lint_paths([str(package)]) == []
    assert generate.main(["--formulas", str(package), "--out", str(out)]) == 0
    library = build_library(out, REPO / "build")
    checks = subprocess.run([sys.executable, "-c", OPTIONAL_LIST_CHECK, str(library)], cwd=REPO,
                            capture_output=True, text=True)
    assert checks.returncode == 0, checks.stderr[-3000:]
    assert checks.stdout.split() == ["gradchecks=True", "grad=True"]


# Names C++ keeps for itself, as formula, helper, parameter and local names (keywords; an underscore
# and a capital; a double underscore), and a string literal written with an escape ('\x74anh' is
# "tanh"): each is emitted under a name C++ accepts, and the literal by its value.
CPP_NAMES = '''\
from formulas import Tensor, at, derivative, helper


@helper
def register(xor: Tensor, __scale: float) -> Tensor:
    """``xor * __scale``."""
    _Local = at.mul(xor, __scale)
    return _Local


@derivative("delete(Tensor self, float __w=2.0) -> Tensor")
def delete(self, __w=2.0):
    result = at.mul(at.sin(self), __w)
    def backward(grad):
        new = register(grad, __w)
        return new * at.cos(self)
    return result, backward


@derivative("_Reserved(Tensor register) -> Tensor")
def _Reserved(register):
    result = at.gelu(register, approximate='\\x74anh')
    def backward(grad):
        xor = at.gelu_backward(grad, register, approximate='\\x74anh')
        return xor
    return result, backward
'''

CPP_NAMES_CHECK = """
import sys, torch
from transpiler.build import load_library
load_library(sys.argv[1])
ops = torch.ops.cppnames
x = torch.linspace(-1.5, 2.0, 6, dtype=torch.float64, requires_grad=True)
ok = all(torch.autograd.gradcheck(op, (x,)) and torch.autograd.gradgradcheck(op, (x,))
         for op in (ops.delete, lambda t: ops.delete(t, 0.5), getattr(ops, "_Reserved")))
(g,) = torch.autograd.grad(ops.delete(x, 0.5).sum(), x)
tanh_gelu = torch.equal(getattr(ops, "_Reserved")(x), torch.nn.functional.gelu(x, approximate="tanh"))
print(f"gradchecks={ok} grad={torch.allclose(g, 0.5 * torch.cos(x))} tanh={tanh_gelu}")
"""


def test_cpp_keywords_reserved_names_and_escaped_strings(tmp_path: Path):
    """A package whose formula, helper, parameter and local names are C++ keywords or reserved
    identifiers, and whose string literal is written with an escape, transpiles, compiles,
    gradchecks and means what the Python means."""
    package, out = tmp_path / "cppnames", tmp_path / "names_cpp"
    package.mkdir()
    (package / "names.py").write_text(CPP_NAMES)
    assert generate.main(["--formulas", str(package), "--out", str(out)]) == 0
    code = (out / "names.cpp").read_text() + (out / "helpers.cpp").read_text()
    assert '"tanh"' in code and "x74" not in code
    library = build_library(out, REPO / "build")
    checks = subprocess.run([sys.executable, "-c", CPP_NAMES_CHECK, str(library)], cwd=REPO,
                            capture_output=True, text=True)
    assert checks.returncode == 0, checks.stderr[-3000:]
    assert checks.stdout.split() == ["gradchecks=True", "grad=True", "tanh=True"]
