"""The linter never imports or executes what it reads.

Each input below would create a marker file if it were imported or run (at
module level, in a class body, in a decorator, in a default argument, through
``formulas`` import machinery). After linting, no marker exists and no module
of that name was loaded.
"""
from __future__ import annotations

import sys
from pathlib import Path

from transpiler.lint.runner import lint

SIDE_EFFECT = "open({marker!r}, 'w').write('executed')"

FUNCTION_FILE = '''\
import torch
{effect}


def touch(function):
    {effect}
    return function


class Keep(torch.autograd.Function):
    {effect}

    @staticmethod
    @touch
    def forward(ctx, x, n=[{effect}]):
        y = x.exp()
        ctx.save_for_backward(y)
        return x.clone()

    @staticmethod
    def backward(ctx, grad):
        (y,) = ctx.saved_tensors
        return grad * y
'''

FORMULA_FILE = '''\
from formulas import at, derivative
{effect}


@derivative("sin(Tensor self) -> Tensor")
def sin(self):
    {effect}
    result = at.sin(self)
    c = at.cos(self)

    def backward(grad):
        return grad * c

    return result, backward
'''


def test_linting_imports_and_executes_nothing(tmp_path: Path):
    markers = {name: tmp_path / f"{name}.marker" for name in ("function_module", "formula_module")}
    (tmp_path / "function_module.py").write_text(
        FUNCTION_FILE.format(effect=SIDE_EFFECT.format(marker=str(markers["function_module"]))))
    (tmp_path / "formula_module.py").write_text(
        FORMULA_FILE.format(effect=SIDE_EFFECT.format(marker=str(markers["formula_module"]))))
    (tmp_path / "__init__.py").write_text(SIDE_EFFECT.format(marker=str(tmp_path / "package.marker")) + "\n")

    result = lint([str(tmp_path)])

    # both files were really analysed: each has its DB100 (and transpile would refuse the
    # formula's side effect, a call outside the formula language: DB200)
    assert sorted((Path(d.path).name, d.code) for d in result.diagnostics) == [
        ("formula_module.py", "DB100"), ("formula_module.py", "DB200"), ("function_module.py", "DB100")]
    assert result.functions == 1 and result.formula_files == 1
    assert not any(marker.exists() for marker in markers.values())
    assert not (tmp_path / "package.marker").exists()
    assert "function_module" not in sys.modules and "formula_module" not in sys.modules


def test_fix_rewrites_without_executing(tmp_path: Path):
    marker = tmp_path / "fix.marker"
    path = tmp_path / "formula_module.py"
    path.write_text(FORMULA_FILE.format(effect=SIDE_EFFECT.format(marker=str(marker))))
    result = lint([str(path)], fix=True)
    assert result.fixed == (str(path),)
    assert "c = at.cos(self)\n        return grad * c" in path.read_text()
    assert not marker.exists()
