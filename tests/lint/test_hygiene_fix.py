"""The fixes of DB110 (unsafe: ``save_for_backward`` instead of a ctx attribute) and DB111 (safe:
keep the metadata, not the tensor): before/after text, the command line's ``--fix`` / ``--diff``,
SARIF ``fixes``, and each fixed Function under gradcheck and gradgradcheck."""
from __future__ import annotations

import json
import textwrap

import pytest

from transpiler.lint import cli
from transpiler.lint.function_fix import Located, fix_functions
from transpiler.lint.runner import lint
from transpiler.lint.settings import Settings

HYGIENE = Settings(select=("DB", "DB110", "DB111"))


def src(text: str) -> str:
    return textwrap.dedent(text).lstrip("\n")


def findings(tmp_path, source: str) -> list[Located]:
    path = tmp_path / "f.py"
    path.write_text(source)
    return [Located(d.line, d.col, d.code) for d in lint([str(path)], settings=HYGIENE).diagnostics]


def fixed(tmp_path, source: str, unsafe: bool = True) -> str:
    return fix_functions(source, findings(tmp_path, source), unsafe).source


SUM_TO_SHAPE = src('''
    import torch


    class SumRows(torch.autograd.Function):
        """y = x.sum(0) + exp(w): backward needs x's shape and w's values."""

        @staticmethod
        def forward(ctx, x, w):
            ctx.save_for_backward(x, w)
            return x.sum(0) + w.exp()

        @staticmethod
        def backward(ctx, grad):
            x, w = ctx.saved_tensors
            grad_x = grad.expand(x.size(0), x.shape[1]).to(x.dtype)
            return grad_x, grad * w.exp() * torch.ones(x.shape, dtype=grad.dtype).mean(0)
''')

WEIGHT_ON_CTX = src('''
    import torch


    class Scale(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, w):
            """y = x * w."""
            ctx.w = w
            y = x * w
            ctx.y = y
            return y

        @staticmethod
        def backward(ctx, grad):
            return grad * ctx.w, grad * ctx.y / ctx.w
''')


def test_metadata_fix_keeps_the_metadata_and_drops_the_saved_tensor(tmp_path) -> None:
    assert [f.code for f in findings(tmp_path, SUM_TO_SHAPE)] == ["DB111"]
    assert fixed(tmp_path, SUM_TO_SHAPE, unsafe=False) == SUM_TO_SHAPE.replace(
        "        ctx.save_for_backward(x, w)\n",
        "        ctx.x_dtype = x.dtype\n        ctx.x_shape = x.shape\n        ctx.save_for_backward(w)\n",
    ).replace("x, w = ctx.saved_tensors", "(w,) = ctx.saved_tensors").replace(
        ".expand(x.size(0), x.shape[1]).to(x.dtype)", ".expand(ctx.x_shape[0], ctx.x_shape[1]).to(ctx.x_dtype)",
    ).replace("torch.ones(x.shape,", "torch.ones(ctx.x_shape,")


def test_attribute_fix_moves_the_tensors_into_save_for_backward(tmp_path) -> None:
    assert [f.code for f in findings(tmp_path, WEIGHT_ON_CTX)] == ["DB110", "DB110"]
    assert fixed(tmp_path, WEIGHT_ON_CTX, unsafe=False) == WEIGHT_ON_CTX      # an unsafe fix
    assert fixed(tmp_path, WEIGHT_ON_CTX) == src('''
        import torch


        class Scale(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x, w):
                """y = x * w."""
                y = x * w
                ctx.save_for_backward(w, y)
                return y

            @staticmethod
            def backward(ctx, grad):
                w, y = ctx.saved_tensors
                return grad * w, grad * y / w
    ''')


@pytest.mark.parametrize("source, reason", [
    (WEIGHT_ON_CTX.replace("        y = x * w\n", "        w = w * 2\n        y = x * w\n"),
     "w is rebound between its keeping and the save"),
    (WEIGHT_ON_CTX.replace("return grad * ctx.w,", "w = 1\n        return grad * ctx.w,"),
     "backward already uses the name w"),
    (WEIGHT_ON_CTX.replace("        ctx.y = y\n", "        if x.dim():\n            ctx.y = y\n"),
     "ctx.y is kept in a branch"),
])
def test_no_attribute_fix_where_a_precondition_fails(tmp_path, source, reason) -> None:
    found = findings(tmp_path, source)
    assert "DB110" in {f.code for f in found}, reason
    change = fix_functions(source, found, unsafe=True)
    assert not any(f.code == "DB110" for f in change.applied) and change.source == source, reason


def run_fixed(source: str, name: str):
    namespace: dict = {}
    exec(compile(source, f"{name}.py", "exec"), namespace)  # noqa: S102 - our own fixture, run only here
    return namespace[name].apply


@pytest.mark.parametrize("source, name, unsafe", [(SUM_TO_SHAPE, "SumRows", False), (WEIGHT_ON_CTX, "Scale", True)])
def test_the_fixed_function_passes_gradcheck_and_gradgradcheck(tmp_path, source, name, unsafe) -> None:
    torch = pytest.importorskip("torch")
    after = fixed(tmp_path, source, unsafe)
    assert after != source and findings(tmp_path, after) == []
    inputs = (torch.randn(3, 4, dtype=torch.float64, requires_grad=True),
              torch.rand(4, dtype=torch.float64, requires_grad=True) + 0.5)
    if name == "Scale":
        inputs = (inputs[0], (torch.rand(3, 4, dtype=torch.float64) + 0.5).requires_grad_())
    for function in (run_fixed(source, name), run_fixed(after, name)):
        assert torch.autograd.gradcheck(function, inputs)
        assert torch.autograd.gradgradcheck(function, inputs)


def test_a_tensor_changed_in_place_after_forward_raises_once_saved(tmp_path) -> None:
    torch = pytest.importorskip("torch")
    before, after = run_fixed(WEIGHT_ON_CTX, "Scale"), run_fixed(fixed(tmp_path, WEIGHT_ON_CTX), "Scale")
    x = torch.randn(3, dtype=torch.float64, requires_grad=True)
    w = torch.rand(3, dtype=torch.float64) + 0.5
    for function, raises in ((before, False), (after, True)):
        weight = w.clone().requires_grad_()
        y = function(x, weight * 1)
        with torch.no_grad():
            y.mul_(0)                         # the saved output changed after forward
        if raises:
            with pytest.raises(RuntimeError, match="modified by an inplace operation"):
                y.sum().backward()
        else:
            y.sum().backward()                # a silently wrong gradient: what DB110 is about


def run_cli(argv: list[str], capsys) -> tuple[int, str, str]:
    status = cli.main(argv)
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def test_fix_applies_the_safe_fix_and_unsafe_fixes_the_other(tmp_path, capsys) -> None:
    path = tmp_path / "f.py"
    path.write_text(SUM_TO_SHAPE + "\n\n" + WEIGHT_ON_CTX.replace("import torch\n\n\n", ""))
    status, out, err = run_cli(["--no-cache", "--select", "DB11", "--fix", str(path)], capsys)
    assert status == 1 and "DB111" not in out and out.count("DB110") == 2
    assert "ctx.x_shape = x.shape" in path.read_text() and "ctx.w = w" in path.read_text()
    status, out, err = run_cli(["--no-cache", "--select", "DB11", "--diff", "--unsafe-fixes", str(path)], capsys)
    assert "-        ctx.w = w\n" in out and "+        ctx.save_for_backward(w, y)\n" in out
    status, out, err = run_cli(["--no-cache", "--select", "DB11", "--fix", "--unsafe-fixes", str(path)], capsys)
    assert status == 0 and out == ""


def test_sarif_carries_each_fix_as_replacements(tmp_path, capsys) -> None:
    path = tmp_path / "f.py"
    path.write_text(SUM_TO_SHAPE)
    status, out, _ = run_cli(["--no-cache", "--select", "DB111", "--format", "sarif", str(path)], capsys)
    [result] = json.loads(out)["runs"][0]["results"]
    [fix] = result["fixes"]
    assert fix["description"]["text"] == "safe: keep the metadata on ctx instead of the tensor"
    [change] = fix["artifactChanges"]
    assert change["artifactLocation"]["uri"] == path.as_uri()
    lines = SUM_TO_SHAPE.splitlines(keepends=True)
    for replacement in reversed(change["replacements"]):     # apply them: the --fix result
        region = replacement["deletedRegion"]
        assert region["startColumn"] == region["endColumn"] == 1
        lines[region["startLine"] - 1:region["endLine"] - 1] = [replacement["insertedContent"]["text"]]
    assert "".join(lines) == fixed(tmp_path, SUM_TO_SHAPE)
    assert [d.fix for d in lint([str(path)], settings=HYGIENE).diagnostics] == [fix["description"]["text"]]


def test_sarif_has_no_fixes_where_none_is_offered(tmp_path, capsys) -> None:
    path = tmp_path / "f.py"
    path.write_text(SUM_TO_SHAPE.replace("(x.size(0), x.shape[1])", "(*x.size(0, 1),)"))
    status, out, _ = run_cli(["--no-cache", "--select", "DB111", "--format", "sarif", str(path)], capsys)
    results = json.loads(out)["runs"][0]["results"]
    assert results and all("fixes" not in r for r in results)
