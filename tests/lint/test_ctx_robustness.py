"""The ctx rules on generated Function bodies: always an answer, never an internal error.

Hypothesis builds forward/backward bodies from a small grammar of the
constructs the dataflow handles (aliases, unpacking, starred, branches, loops,
comprehensions, walrus, in-place calls, views, ``out=``, ctx attributes).
Every generated file that compiles must lint to rule codes only,
and the fresh ``w.exp()`` every generated forward keeps must get its DB100
(unless backward is @once_differentiable).
"""
from __future__ import annotations

import warnings
from pathlib import Path

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from transpiler.lint.file_check import check_file

NAMES = ["x", "y", "a", "b", "buf"]
ATOMS = st.sampled_from(NAMES + ["2.5", "None", "ctx.kept", "x.shape", "n"])


def expressions(depth: int = 2) -> st.SearchStrategy[str]:
    if depth == 0:
        return ATOMS
    inner = expressions(depth - 1)
    return st.one_of(
        ATOMS,
        st.builds("{}.exp()".format, inner),
        st.builds("torch.max({}, 1)".format, inner),
        st.builds("torch.zeros_like({})".format, inner),
        st.builds("({}, {})".format, inner, inner),
        st.builds("[{}, *{}]".format, inner, inner),
        st.builds("{}[0]".format, inner),
        st.builds("{}.select(1, 0)".format, inner),
        st.builds("({} * {})".format, inner, inner),
        st.builds("({} > {})".format, inner, inner),
        st.builds("({} if n else {})".format, inner, inner),
        st.builds("[t for t in {}]".format, inner),
        st.builds("(z := {})".format, inner),
        st.builds("helper({})".format, inner),
        st.builds("(lambda q: {})".format, inner),
        st.builds("{}.values".format, inner),
    )


def statements(depth: int = 1) -> st.SearchStrategy[list[str]]:
    expression = expressions()
    name = st.sampled_from(NAMES)
    simple = st.one_of(
        st.builds("{} = {}".format, name, expression),
        st.builds("{}, {} = {}".format, name, name, expression),
        st.builds("{}, *{} = {}".format, name, name, expression),
        st.builds("ctx.save_for_backward({})".format, expression),
        st.builds("ctx.save_for_backward(*{})".format, expression),
        st.builds("ctx.kept = {}".format, expression),
        st.builds("{}.add_({})".format, name, expression),
        st.builds("{}[0] = {}".format, name, expression),
        st.builds("{} += {}".format, name, expression),
        st.builds("torch.mul({}, 2, out={})".format, expression, name),
        st.builds("{}.append({})".format, name, expression),
        st.just("del a"),
    ).map(lambda line: [line])
    if depth == 0:
        return simple
    block = st.lists(statements(depth - 1), min_size=1, max_size=3).map(lambda blocks: sum(blocks, []))
    indent = block.map(lambda lines: ["    " + line for line in lines])
    return st.one_of(
        simple,
        st.tuples(expression, indent, indent).map(lambda p: [f"if {p[0]}:", *p[1], "else:", *p[2]]),
        st.tuples(name, expression, indent).map(lambda p: [f"for {p[0]} in {p[1]}:", *p[2]]),
        st.tuples(expression, indent).map(lambda p: [f"while {p[0]}:", *p[1]]),
        st.tuples(indent, indent).map(lambda p: ["try:", *p[0], "except Exception as e:", *p[1]]),
        st.tuples(expression, indent).map(lambda p: [f"with {p[0]} as cm:", *p[1]]),
    )


def compiles(source: str) -> bool:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")           # "'NoneType' object is not subscriptable"...
            compile(source, "generated.py", "exec", dont_inherit=True)
    except SyntaxError:                               # e.g. a walrus in a comprehension's iterable
        return False
    return True


BODIES = st.lists(statements(), min_size=1, max_size=6).map(lambda blocks: sum(blocks, []))


def function_file(forward: list[str], backward: list[str], once: bool) -> str:
    def body(lines: list[str]) -> str:
        return "\n".join("        " + line for line in lines)

    decorator = "    @once_differentiable\n" if once else ""
    return (
        "import torch\nfrom torch.autograd.function import once_differentiable\n\n\n"
        "class Generated(torch.autograd.Function):\n"
        "    @staticmethod\n"
        "    def forward(ctx, x, y, n, w):\n"
        "        a = b = buf = x\n"
        f"{body(forward)}\n"
        "        ctx.save_for_backward(w.exp())\n"
        "        return x.clone()\n\n"
        "    @staticmethod\n"
        f"{decorator}"
        "    def backward(ctx, grad):\n"
        "        x = y = a = b = buf = grad\n"
        f"{body(backward)}\n"
        "        return grad, None, None, grad\n")     # w gets a gradient: w.exp() carries one


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(forward=BODIES, backward=BODIES, once=st.booleans())
def test_generated_functions_never_make_an_internal_error(tmp_path_factory, forward, backward, once):
    source = function_file(forward, backward, once)
    assume(compiles(source))                          # a few combinations are not valid Python
    path = Path(tmp_path_factory.mktemp("generated")) / "generated.py"
    path.write_text(source)
    report = check_file(str(path))
    codes = [d.code for d in report.diagnostics]
    # DB110/DB111 (opt-in hygiene) are reported by the per-file pass and filtered by selection later
    assert set(codes) <= {"DB100", "DB101", "DB102", "DB104", "DB110", "DB111"}, report.diagnostics
    assert report.functions == 1
    fresh_exp_line = source.splitlines().index("        ctx.save_for_backward(w.exp())") + 1
    kept_fresh_exp = any(d.code == "DB100" and d.line == fresh_exp_line for d in report.diagnostics)
    assert kept_fresh_exp != once
