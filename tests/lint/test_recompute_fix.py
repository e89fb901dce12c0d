"""DB100's recompute fix on ``torch.autograd.Function``: save the inputs, recompute in backward.

Before/after text of the planned change, the cases where it is not offered (then
``@once_differentiable`` is), and under torch: the fixed Functions pass gradcheck
and gradgradcheck where the originals' double backward was silently wrong.
"""
from __future__ import annotations

import textwrap
import warnings

import pytest

from transpiler.lint.function_fix import Located, fix_functions
from transpiler.lint.recompute_fix import DESCRIPTION
from transpiler.lint.runner import lint


def src(text: str) -> str:
    return textwrap.dedent(text).lstrip("\n")


def fixed(tmp_path, source: str):
    """``fix_functions`` over the file's DB100 findings, as ``--fix --unsafe-fixes`` runs it."""
    path = tmp_path / "f.py"
    path.write_text(source)
    findings = [Located(d.line, d.col, d.code) for d in lint([str(path)]).diagnostics if d.code == "DB100"]
    assert findings
    return fix_functions(source, findings, unsafe=True)


SINH = src('''
    import torch


    class Sinh(torch.autograd.Function):
        """The double-backward tutorial's wrong version: both exponentials saved, x not."""

        @staticmethod
        def forward(ctx, x):
            expx = torch.exp(x)
            expnegx = torch.exp(-x)
            ctx.save_for_backward(expx, expnegx)
            return (expx - expnegx) / 2

        @staticmethod
        def backward(ctx, grad_out):
            expx, expnegx = ctx.saved_tensors
            return grad_out * (expx + expnegx) / 2
''')

def test_both_intermediates_recomputed_from_the_input_saved_instead(tmp_path) -> None:
    change = fixed(tmp_path, SINH)
    assert change.recomputed == change.applied and len(change.applied) == 1
    assert change.source == SINH.replace(
        "ctx.save_for_backward(expx, expnegx)", "ctx.save_for_backward(x)").replace(
        "        expx, expnegx = ctx.saved_tensors\n",
        "        (x,) = ctx.saved_tensors\n        expx = torch.exp(x)\n        expnegx = torch.exp(-x)\n")


MATMUL_TANH = src('''
    import torch


    class MatmulTanh(torch.autograd.Function):
        """y = tanh(x @ w) summed over its last axis, differentiated in w (x is data); h = tanh(x @ w)
        kept with x; backward reads x as `a`, and recomputing h needs w too."""

        @staticmethod
        def forward(ctx, x, w):
            h = torch.tanh(x @ w)
            ctx.save_for_backward(x, h)
            return h.sum(-1)

        @staticmethod
        def backward(ctx, grad):
            a, t = ctx.saved_tensors
            gh = grad.unsqueeze(-1) * (1 - t * t)
            return None, a.transpose(-1, -2) @ gh
''')


def test_inputs_are_read_under_backwards_names_and_the_missing_one_is_saved(tmp_path) -> None:
    change = fixed(tmp_path, MATMUL_TANH)
    assert change.source == MATMUL_TANH.replace(
        "ctx.save_for_backward(x, h)", "ctx.save_for_backward(x, w)").replace(
        "        a, t = ctx.saved_tensors\n",
        "        a, w = ctx.saved_tensors\n        t = torch.tanh(a @ w)\n")


@pytest.mark.parametrize("forward,backward_call", [
    (["e = torch.empty_like(x)", "exp_kernel[(1,)](x, e)"], "grad * 2 * e"),       # a kernel fills a buffer
    (["e = x.exp()", "x.mul_(2)"], "grad * 2 * e"),                                 # the input changes after
    (["t = x * 3", "e = t.exp()", "t.add_(1)"], "grad * 2 * e"),                    # reads a local, not an input
    (["e = x.exp()"], "scale_kernel[(1,)](grad, e)"),                               # backward launches a kernel
])
def test_not_offered_where_backward_cannot_recompute_it_then_once_differentiable_is(
        tmp_path, forward: list[str], backward_call: str) -> None:
    body = "\n                ".join(forward)
    source = src(f'''
        import torch


        class Exp2(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                {body}
                ctx.save_for_backward(e)
                return e * 2

            @staticmethod
            def backward(ctx, grad):
                (e,) = ctx.saved_tensors
                return {backward_call}
    ''')
    change = fixed(tmp_path, source)
    assert not change.recomputed and change.applied
    assert "@once_differentiable" in change.source and "ctx.save_for_backward(e)" in change.source


def test_the_finding_describes_the_recompute_and_sarif_carries_it(tmp_path) -> None:
    path = tmp_path / "f.py"
    path.write_text(SINH)
    [finding] = lint([str(path)], edits=True).diagnostics
    assert finding.fix == DESCRIPTION and finding.edits


@pytest.mark.parametrize("source,name,shapes", [(SINH, "Sinh", [(3,)]), (MATMUL_TANH, "MatmulTanh", [(2, 3), (3, 4)])])
def test_fixed_functions_pass_gradcheck_and_gradgradcheck(tmp_path, source: str, name: str, shapes) -> None:
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    *data, leaf = [torch.randn(*shape, dtype=torch.float64) for shape in shapes]
    leaf.requires_grad_()

    def checked(function):
        return lambda t: function.apply(*data, t)

    before, after = {}, {}
    exec(compile(source, "before.py", "exec"), before)  # noqa: S102 - our own fixture, run only here
    exec(compile(fixed(tmp_path, source).source, "after.py", "exec"), after)  # noqa: S102
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert torch.autograd.gradcheck(checked(before[name]), (leaf,))
        assert torch.autograd.gradgradcheck(checked(before[name]), (leaf,), raise_exception=False) is False
        assert torch.autograd.gradcheck(checked(after[name]), (leaf,))
        assert torch.autograd.gradgradcheck(checked(after[name]), (leaf,))
