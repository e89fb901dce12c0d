"""The text prefilter never turns away a file the analysis would flag.

Each spelling below once hid a Function (or its base) from the prefilter or the
analysis; they must all be found. Then the whole analysis runs with and without
the prefilter (both of its tests made to always say yes) over the lint
fixtures, their respellings and the fuzz corpus of
``tests/lint/test_fuzz_captures.py``, and must find exactly the same.
(``python benchmarks/lint_realworld.py --compare-prefilter`` does the same over
the downloaded real-world corpus.)
"""
from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from lint.test_fuzz_captures import cases

from transpiler.lint import prefilter
from transpiler.lint.runner import lint

FIXTURES = Path(__file__).resolve().parent / "fixtures"
BODY = '''
    @staticmethod
    def forward(ctx, x):
        y = x.exp()
        ctx.save_for_backward(y * 2)
        return y

    @staticmethod
    def backward(ctx, grad):
        (kept,) = ctx.saved_tensors
        return grad * kept
'''
SPELLINGS = {          # a Function that keeps an intermediate (DB100), under spellings once missed
    "non-ASCII class name": "import torch\nclass Φunction(torch.autograd.Function):",
    "parenthesis in a comment in the bases": "import torch\nclass Fn(  # see (1)\n        torch.autograd.Function):",
    "backslash after class": "import torch\nclass \\\n        Fn(torch.autograd.Function):",
    "form feed before class": "import torch\n\x0cclass Fn(torch.autograd.Function):",
    "base assigned to a name": "import torch\nBase = torch.autograd.Function\nclass Fn(Base):",
    "chain of assigned names": "import torch.autograd as ag\nBase = ag.Function\nRoot: type = Base\nclass Fn(Root):",
    "star import": "from torch.autograd import *\nclass Fn(Function):",
    "star import of the module": "from torch.autograd.function import *\nclass Fn(InplaceFunction):",
    "getattr": "import torch\nclass Fn(getattr(torch.autograd, 'Function')):",
    "assigned from getattr": "import torch\nBase = getattr(torch.autograd, 'Function')\nclass Fn(Base):",
    "importlib": "import importlib\nclass Fn(importlib.import_module('torch.autograd').Function):",
    "__import__": "class Fn(__import__('torch.autograd').autograd.Function):",
    "non-ASCII alias": "from torch.autograd import Function as Φ\nclass Fn(Φ):",
}
LINE_BREAKS = {"\\n": "\n", "\\r": "\r", "\\r\\n": "\r\n"}


def write(path: Path, text: str, newline: str = "\n") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(text.replace("\n", newline).encode("utf-8"))
    return path


@pytest.mark.parametrize("newline", LINE_BREAKS.values(), ids=LINE_BREAKS.keys())
@pytest.mark.parametrize("spelling", SPELLINGS)
def test_every_spelling_of_a_function_is_analysed(tmp_path, spelling, newline):
    path = write(tmp_path / "fn.py", SPELLINGS[spelling] + BODY, newline)
    assert [d.code for d in lint([str(path)], trust_bytecode=False).diagnostics] == ["DB100"]


FORMULA = '''\
import formulas
from formulas import at, derivative


DECORATOR
def fp(self):
    c = at.cos(self)
    result = at.sin(self)
    def backward(grad):
        return grad * c
    return result, backward
'''
DECORATORS = ['@derivative("fp(Tensor self) -> Tensor")', '@ (derivative("fp(Tensor self) -> Tensor"))',
              '@formulas . \\\n    derivative("fp(Tensor self) -> Tensor")']


@pytest.mark.parametrize("decorator", DECORATORS)
def test_every_spelling_of_the_derivative_decorator_is_a_formula_file(tmp_path, decorator):
    path = write(tmp_path / "formula.py", FORMULA.replace("DECORATOR", decorator))
    result = lint([str(path)], trust_bytecode=False)
    assert result.formula_files == 1 and "DB100" in [d.code for d in result.diagnostics]


def without_prefilter(monkeypatch) -> None:
    """Both tests of the prefilter say yes: every file goes through the full analysis."""
    monkeypatch.setattr(prefilter, "may_define_function", lambda path, source: True)
    monkeypatch.setattr(prefilter, "may_use_derivative", lambda source: True)


def same_with_and_without_prefilter(paths: list[Path], monkeypatch) -> tuple:
    with_it = lint([str(p) for p in paths], jobs=1, trust_bytecode=False)
    with monkeypatch.context() as patched:
        without_prefilter(patched)
        without_it = lint([str(p) for p in paths], jobs=1, trust_bytecode=False)
    assert with_it.diagnostics == without_it.diagnostics
    assert (with_it.functions, with_it.formula_files) == (without_it.functions, without_it.formula_files)
    return with_it.diagnostics


RESPELLINGS = {        # whole-file rewrites that keep the meaning of a fixture
    "\\r line breaks": lambda text: text.replace("\n", "\r"),
    "form feed before class": lambda text: text.replace("\nclass ", "\n\x0cclass "),
    "comment in the bases": lambda text: text.replace("(torch.autograd.Function)", "(  # (base)\n    torch.autograd.Function)"),
    "backslash after class": lambda text: text.replace("\nclass ", "\nclass \\\n    "),
}


@pytest.mark.parametrize("respelling", [None, *RESPELLINGS])
def test_the_fixtures_have_the_same_findings_with_and_without_the_prefilter(tmp_path, monkeypatch, respelling):
    paths = []
    for fixture in sorted(FIXTURES.rglob("*.py")):
        text = fixture.read_text()
        if respelling is not None:
            text = RESPELLINGS[respelling](text)
        paths.append(write(tmp_path / fixture.relative_to(FIXTURES), text))
    found = same_with_and_without_prefilter(paths, monkeypatch)
    assert {d.code for d in found} >= {"DB100", "DB101", "DB102", "DB104"}     # the fixtures' findings


@settings(max_examples=40, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(case=cases())
def test_the_fuzz_corpus_has_the_same_findings_with_and_without_the_prefilter(tmp_path_factory, monkeypatch, case):
    directory = tmp_path_factory.mktemp("fuzz")
    paths = [write(directory / "fz.py", case.source),
             write(directory / "fz_cr.py", case.source, "\r"),
             write(directory / "fz_parenthesized.py", case.source.replace("@derivative(", "@ (derivative(").replace(
                 '-> Tensor")', '-> Tensor"))'))]
    same_with_and_without_prefilter(paths, monkeypatch)


def test_a_file_with_its_own_function_still_finds_subclasses_of_another_files(tmp_path, monkeypatch):
    """A file the prefilter passes for one Function class is also checked for classes deriving
    from Function classes of other linted files."""
    write(tmp_path / "pkg" / "__init__.py", "")
    write(tmp_path / "pkg" / "base.py", "import torch\n\n\nclass Root(torch.autograd.Function):\n    pass\n")
    write(tmp_path / "pkg" / "impl.py", "import torch\nfrom pkg.base import Root\n\n\n"
          "class Own(torch.autograd.Function):\n    pass\n\n\nclass Impl(Root):" + BODY)
    found = same_with_and_without_prefilter([tmp_path / "pkg"], monkeypatch)
    assert [(Path(d.path).name, d.code) for d in found] == [("impl.py", "DB100")]
