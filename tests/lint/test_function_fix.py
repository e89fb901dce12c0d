"""The unsafe fix for ``torch.autograd.Function``: ``@once_differentiable`` on backward.

Before/after text for the codemod; the command line's ``--fix`` / ``--diff`` with and
without ``--unsafe-fixes``; and, under torch, a fixed Function that passes gradcheck
and whose double backward raises torch's error where it was silently wrong before.
"""
from __future__ import annotations

import textwrap

import pytest

from transpiler.lint import cli
from transpiler.lint.function_fix import once_differentiable_fix
from transpiler.lint.runner import lint


def src(text: str) -> str:
    return textwrap.dedent(text).lstrip("\n")


def db100_lines(tmp_path, source: str) -> list[int]:
    path = tmp_path / "f.py"
    path.write_text(source)
    return [d.line for d in lint([str(path)]).diagnostics if d.code == "DB100"]


def fix(tmp_path, source: str) -> str:
    """The source with the fix of its DB100 findings, as ``--fix --unsafe-fixes`` finds them."""
    return once_differentiable_fix(source, db100_lines(tmp_path, source)).source


KEPT_INTERMEDIATE = src('''
    import torch


    class Exp2(torch.autograd.Function):
        """y = 2 exp(x), keeping exp(x): an intermediate (written into a buffer: not recomputed)."""

        @staticmethod
        def forward(ctx, x):
            e = torch.exp(x, out=torch.empty_like(x))
            ctx.save_for_backward(e)
            return e * 2

        @staticmethod
        def backward(ctx, grad):
            (e,) = ctx.saved_tensors
            return grad * 2 * e
''')


def test_decorator_goes_below_staticmethod_and_the_import_is_added(tmp_path) -> None:
    assert db100_lines(tmp_path, KEPT_INTERMEDIATE) == [10]
    assert fix(tmp_path, KEPT_INTERMEDIATE) == src('''
        import torch
        from torch.autograd.function import once_differentiable


        class Exp2(torch.autograd.Function):
            """y = 2 exp(x), keeping exp(x): an intermediate (written into a buffer: not recomputed)."""

            @staticmethod
            def forward(ctx, x):
                e = torch.exp(x, out=torch.empty_like(x))
                ctx.save_for_backward(e)
                return e * 2

            @staticmethod
            @once_differentiable
            def backward(ctx, grad):
                (e,) = ctx.saved_tensors
                return grad * 2 * e
    ''')


def test_kernel_backward_joins_an_existing_import_from_the_module(tmp_path) -> None:
    before = src('''
        from torch.autograd.function import Function

        import my_ext


        class Kernel(Function):
            @staticmethod
            def forward(ctx, x):
                out, workspace = my_ext.forward(x)
                ctx.save_for_backward(x, workspace)
                return out

            @staticmethod
            def backward(ctx, grad):
                x, workspace = ctx.saved_tensors
                return my_ext.backward(grad, x, workspace)
    ''')
    after = fix(tmp_path, before)
    assert after.startswith("from torch.autograd.function import once_differentiable, Function\n")
    assert "    @staticmethod\n    @once_differentiable\n    def backward(ctx, grad):\n" in after
    assert after.count("once_differentiable") == 2


def test_an_aliased_import_is_used_and_none_is_added(tmp_path) -> None:
    before = src('''
        import torch
        from torch.autograd.function import once_differentiable as od


        class Exp2(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                e = x.exp()
                ctx.save_for_backward(e)
                return e * 2

            @staticmethod
            def backward(ctx, grad):
                (e,) = ctx.saved_tensors
                return grad * 2 * e
    ''')
    assert fix(tmp_path, before) == before.replace(
        "    @staticmethod\n    def backward", "    @staticmethod\n    @od\n    def backward")


def test_only_the_function_with_the_finding_is_decorated_and_the_fix_is_idempotent(tmp_path) -> None:
    clean = src('''


        class Square(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                ctx.save_for_backward(x)
                return x * x

            @staticmethod
            def backward(ctx, grad):
                (x,) = ctx.saved_tensors
                return 2 * grad * x
    ''')
    before = KEPT_INTERMEDIATE + clean
    after = fix(tmp_path, before)
    assert after.count("@once_differentiable") == 1 and after.endswith(clean)
    assert fix(tmp_path, after) == after
    assert db100_lines(tmp_path, after) == []


def test_nothing_to_decorate_leaves_the_source_alone() -> None:
    inherited = src('''
        import torch


        class Child(Base):
            @staticmethod
            def forward(ctx, x):
                e = x.exp()
                ctx.save_for_backward(e)
                return e
    ''')
    assert once_differentiable_fix(inherited, [8]).source == inherited      # backward is the base class's
    assert once_differentiable_fix(KEPT_INTERMEDIATE, [1]).source == KEPT_INTERMEDIATE   # not in a class
    assert once_differentiable_fix("def (\n", [1]).source == "def (\n"


def test_findings_describe_the_unsafe_fix_only_where_it_applies(tmp_path) -> None:
    path = tmp_path / "f.py"
    path.write_text(KEPT_INTERMEDIATE)
    [finding] = lint([str(path)]).diagnostics
    assert finding.fix.startswith("unsafe (--unsafe-fixes): where forward computes the intermediate from its "
                                  "inputs alone, save those and recompute it in backward; otherwise mark "
                                  "backward @once_differentiable")
    [finding] = lint([str(path)], edits=True).diagnostics               # SARIF: the one it gets, planned
    assert finding.fix == ("unsafe (--unsafe-fixes): mark backward @once_differentiable, so that double "
                           "backward raises instead of being silently wrong")
    path.write_text(KEPT_INTERMEDIATE.replace("    @staticmethod\n    def backward", "    @staticmethod\n    def vjp"))
    assert [(d.code, d.fix) for d in lint([str(path)]).diagnostics] == [("DB100", None)]


def run_cli(argv: list[str], capsys) -> tuple[int, str, str]:
    status = cli.main(argv)
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def test_fix_without_unsafe_fixes_changes_nothing_and_says_so(tmp_path, capsys) -> None:
    path = tmp_path / "f.py"
    path.write_text(KEPT_INTERMEDIATE)
    status, out, err = run_cli(["--no-cache", "--fix", str(path)], capsys)
    assert status == 1 and path.read_text() == KEPT_INTERMEDIATE
    assert ":10:9: DB100 " in out
    assert err == ("transpile lint: --fix fixed nothing: 1 finding, of which 1 has an unsafe fix "
                   "(add --unsafe-fixes to apply it)\n")
    status, out, err = run_cli(["--no-cache", "--diff", str(path)], capsys)
    assert (status, out) == (0, "")
    assert err == "transpile lint: not shown: 1 finding's unsafe fix (add --unsafe-fixes)\n"


def test_fix_with_nothing_fixable_says_so(tmp_path, capsys) -> None:
    path = tmp_path / "f.py"
    path.write_text(src('''
        import torch


        class Hooked(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                return x

            @staticmethod
            def backward(ctx, grad):
                global calls
                return grad
    '''))
    status, out, err = run_cli(["--no-cache", "--fix", str(path)], capsys)
    assert status == 1 and "DB104" in out
    assert err == ("transpile lint: --fix fixed nothing: 1 finding, none fixable "
                   "(each message names its remedy)\n")


def test_unsafe_fixes_show_in_the_diff_and_apply_with_fix(tmp_path, capsys) -> None:
    path = tmp_path / "f.py"
    path.write_text(KEPT_INTERMEDIATE)
    status, out, err = run_cli(["--no-cache", "--diff", "--unsafe-fixes", str(path)], capsys)
    assert status == 1 and err == "" and path.read_text() == KEPT_INTERMEDIATE
    assert "+from torch.autograd.function import once_differentiable\n" in out
    assert "+    @once_differentiable\n" in out
    status, out, err = run_cli(["--no-cache", "--fix", "--unsafe-fixes", str(path)], capsys)
    assert (status, out, err) == (0, "", f"transpile lint: fixed {path}\n")
    assert path.read_text() == once_differentiable_fix(KEPT_INTERMEDIATE, [10]).source


def test_silenced_findings_are_not_fixed(tmp_path, capsys) -> None:
    path = tmp_path / "f.py"
    silenced = KEPT_INTERMEDIATE.replace("ctx.save_for_backward(e)", "ctx.save_for_backward(e)  # noqa: DB100")
    path.write_text(silenced)
    assert run_cli(["--no-cache", "--fix", "--unsafe-fixes", str(path)], capsys) == (0, "", "")
    path.write_text(KEPT_INTERMEDIATE)
    assert run_cli(["--no-cache", "--fix", "--unsafe-fixes", "--ignore", "DB100", str(path)], capsys) == (0, "", "")
    assert path.read_text() == KEPT_INTERMEDIATE


def test_unsafe_fix_on_stdin(tmp_path, capsys, monkeypatch) -> None:
    import io
    import sys

    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(KEPT_INTERMEDIATE.encode())))
    status = cli.main(["--no-cache", "--fix", "--unsafe-fixes", "-"])
    captured = capsys.readouterr()
    assert status == 0 and captured.err == ""
    assert "    @staticmethod\n    @once_differentiable\n    def backward" in captured.out


X_EXP = src('''
    import torch


    class XExp(torch.autograd.Function):
        """y = x exp(x), keeping exp(x): an intermediate."""

        @staticmethod
        def forward(ctx, x):
            e = x.exp()
            ctx.save_for_backward(x, e)
            return x * e

        @staticmethod
        def backward(ctx, grad):
            x, e = ctx.saved_tensors
            return grad * e * (1 + x)
''')


def test_fixed_function_passes_gradcheck_and_double_backward_raises_instead_of_being_wrong(tmp_path) -> None:
    torch = pytest.importorskip("torch")
    before, after = {}, {}
    exec(compile(X_EXP, "before.py", "exec"), before)  # noqa: S102 - our own fixture, run only here
    fixed = fix(tmp_path, X_EXP)
    assert "@once_differentiable" in fixed
    exec(compile(fixed, "after.py", "exec"), after)  # noqa: S102
    x = torch.tensor([0.3, -1.2, 0.7], dtype=torch.float64, requires_grad=True)
    true_second = (x.exp() * (2 + x)).detach()             # d2/dx2 x exp(x)

    def second_derivative(function):
        (first,) = torch.autograd.grad(function.apply(x).sum(), x, create_graph=True)
        return torch.autograd.grad(first.sum(), x)[0]

    # before: the saved exp(x) is a constant to autograd, so double backward returns exp(x)
    # where the answer is exp(x) (2 + x): a wrong number, no error (gradgradcheck sees it)
    wrong = second_derivative(before["XExp"])
    assert torch.allclose(wrong, x.detach().exp()) and not torch.allclose(wrong, true_second)
    assert torch.autograd.gradgradcheck(before["XExp"].apply, (x,), raise_exception=False) is False

    # after: first derivatives unchanged; the same double backward raises
    assert torch.autograd.gradcheck(after["XExp"].apply, (x,))
    with pytest.raises(RuntimeError, match="does not require grad"):
        second_derivative(after["XExp"])
    # with a gradient that requires grad (create_graph through a graph), torch's own message
    g = torch.ones(3, dtype=torch.float64, requires_grad=True)
    (first,) = torch.autograd.grad(after["XExp"].apply(x), x, g, create_graph=True)
    with pytest.raises(RuntimeError, match="marked with @once_differentiable"):
        first.sum().backward()
    # gradgradcheck fails loudly (it differentiates with allow_unused: a zero Jacobian, not the message)
    assert torch.autograd.gradgradcheck(after["XExp"].apply, (x,), raise_exception=False) is False
