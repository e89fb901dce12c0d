"""``--fix``: captured intermediates recomputed at the top of the backward."""
from __future__ import annotations

import textwrap
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from transpiler.frontend import parse_module
from transpiler.lint.closure_rules import check_formula_module
from transpiler.lint.fix import fix_source

OPERATORS = frozenset({"add", "cos", "div", "exp", "mul", "neg", "sin", "sub", "sum", "tanh", "zeros"})


def lint(source: str) -> list[tuple[str, int, int]]:
    module = parse_module("f.py", source)
    return [(d.code, d.line, d.col) for d in check_formula_module(module, source, OPERATORS)]


def fix(source: str) -> str:
    return fix_source("f.py", source, OPERATORS)


def src(text: str) -> str:
    return textwrap.dedent(text).lstrip("\n")


def test_dead_intermediate_moves_into_the_backward_with_its_comments() -> None:
    before = src('''
        from formulas import at, derivative


        @derivative("sin(Tensor self) -> Tensor")
        def sin(self):
            result = at.sin(self)
            # the derivative of sin
            c = at.cos(self)  # cos(x)
            def backward(grad):
                """d/dx sin(x) = cos(x)."""
                return grad * c  # chain rule
            return result, backward
    ''')
    after = src('''
        from formulas import at, derivative


        @derivative("sin(Tensor self) -> Tensor")
        def sin(self):
            result = at.sin(self)
            def backward(grad):
                """d/dx sin(x) = cos(x)."""
                # the derivative of sin
                c = at.cos(self)  # cos(x)
                return grad * c  # chain rule
            return result, backward
    ''')
    assert lint(before) == [("DB100", 11, 23)]
    assert fix(before) == after
    assert lint(after) == []


def test_intermediate_still_used_by_the_forward_is_copied() -> None:
    before = src('''
        from formulas import at, derivative


        @derivative("tanh(Tensor self) -> Tensor")
        def tanh(self):
            e = at.exp(self)
            # e is also needed here
            result = at.div(at.sub(e, 1.0), at.add(e, 1.0))
            def backward(grad):
                return grad * e
            return result, backward
    ''')
    after = src('''
        from formulas import at, derivative


        @derivative("tanh(Tensor self) -> Tensor")
        def tanh(self):
            e = at.exp(self)
            # e is also needed here
            result = at.div(at.sub(e, 1.0), at.add(e, 1.0))
            def backward(grad):
                e = at.exp(self)
                return grad * e
            return result, backward
    ''')
    assert fix(before) == after
    assert lint(after) == []


def test_chains_of_intermediates_are_replayed_in_forward_order() -> None:
    before = src('''
        from formulas import at, derivative


        @derivative("exp(Tensor self) -> Tensor")
        def exp(self):
            result = at.exp(self)
            n = self.sizes()
            doubled = at.mul(self, 2.0)
            shifted = at.add(doubled, at.zeros(n))
            def backward(grad):
                return grad * shifted + grad * doubled
            return result, backward
    ''')
    after = src('''
        from formulas import at, derivative


        @derivative("exp(Tensor self) -> Tensor")
        def exp(self):
            result = at.exp(self)
            n = self.sizes()
            def backward(grad):
                doubled = at.mul(self, 2.0)
                shifted = at.add(doubled, at.zeros(n))
                return grad * shifted + grad * doubled
            return result, backward
    ''')
    assert sorted(code for code, _, _ in lint(before)) == ["DB100", "DB100"]
    assert fix(before) == after
    assert lint(after) == []


def test_intermediate_read_by_a_closure_nested_in_the_backward() -> None:
    before = src('''
        from formulas import at, derivative


        @derivative("cos(Tensor self) -> Tensor")
        def cos(self):
            result = at.cos(self)
            s = at.sin(self)
            def backward(grad):
                def scale(g):
                    return -g * s
                return scale(grad)
            return result, backward
    ''')
    fixed = fix(before)
    assert "    def backward(grad):\n        s = at.sin(self)\n        def scale(g):" in fixed
    assert "    s = at.sin(self)\n    def backward" not in fixed
    assert lint(fixed) == []


def test_what_cannot_be_recomputed_is_left_alone() -> None:
    before = src('''
        from formulas import at, derivative


        @derivative("sum(Tensor self, *, ScalarType? dtype=None) -> Tensor")
        def sum(self, dtype=None):
            result = at.sum(self)
            if self.dim() > 1:
                w = at.exp(self)
            else:
                w = at.sin(self)
            def backward(grad):
                return grad * w
            return result, backward
    ''')
    assert fix(before) == before
    module = parse_module("f.py", before)
    [finding] = check_formula_module(module, before, OPERATORS)
    assert finding.fix is None
    assert "return it as an output" in finding.message


def test_fixable_findings_describe_the_fix() -> None:
    before = src('''
        from formulas import at, derivative


        @derivative("sin(Tensor self) -> Tensor")
        def sin(self):
            result = at.sin(self)
            c = at.cos(self)
            def backward(grad):
                return grad * c
            return result, backward
    ''')
    [finding] = check_formula_module(parse_module("f.py", before), before, OPERATORS)
    assert finding.fix == "recompute at the top of backward: c = at.cos(self)"
    assert finding.as_json()["fix"] == finding.fix


def test_fix_is_idempotent_and_leaves_clean_files_and_syntax_errors_unchanged() -> None:
    before = src('''
        from formulas import at, derivative


        @derivative("sin(Tensor self) -> Tensor")
        def sin(self):
            result = at.sin(self)
            c = at.cos(self)
            def backward(grad):
                return grad * c
            return result, backward
    ''')
    once = fix(before)
    assert once != before
    assert fix(once) == once
    for broken in ("def f(:\n", "s\U00013440elf = 1\n"):   # a syntax error; a name libcst refuses to build
        assert fix(broken) == broken


def test_backward_local_shadowing_blocks_the_fix() -> None:
    before = src('''
        from formulas import at, derivative


        @derivative("sin(Tensor self) -> Tensor")
        def sin(self):
            result = at.sin(self)
            c = at.cos(self)
            def backward(grad):
                out = grad * c
                self = out
                return self
            return result, backward
    ''')
    assert fix(before) == before


def test_container_filled_after_its_binding_is_not_recomputed() -> None:
    before = src('''
        from formulas import at, derivative


        @derivative("exp(Tensor self) -> Tensor")
        def exp(self):
            result = at.exp(self)
            parts = []
            parts.append(at.mul(result, 2.0))
            def backward(grad):
                return grad * parts[0]
            return result, backward
    ''')
    [finding] = check_formula_module(parse_module("f.py", before), before, OPERATORS)
    assert (finding.code, finding.fix) == ("DB100", None)
    assert fix(before) == before


def test_one_line_backward_is_left_alone() -> None:
    before = src('''
        from formulas import at, derivative


        @derivative("sin(Tensor self) -> Tensor")
        def sin(self):
            result = at.sin(self)
            c = at.cos(self)
            def backward(grad): return grad * c
            return result, backward
    ''')
    assert lint(before) == [("DB100", 8, 39)]
    assert fix(before) == before


FIXTURE = (Path(__file__).parent / "fixtures" / "closure" / "DB100.py").read_text()
FIXTURE_LINES = FIXTURE.splitlines(keepends=True)


@settings(max_examples=25, deadline=None)
@given(st.lists(st.tuples(st.integers(0, len(FIXTURE_LINES) - 1), st.booleans()), min_size=1, max_size=3))
def test_rules_and_fix_survive_damaged_files(edits: list[tuple[int, bool]]) -> None:
    lines = list(FIXTURE_LINES)
    for index, duplicate in edits:
        index %= len(lines)
        if duplicate:
            lines.insert(index, lines[-1 - index])
        else:
            del lines[index]
    source = "".join(lines)
    findings = check_formula_module(parse_module("f.py", source), source, OPERATORS)
    assert all(d.line >= 1 and d.col >= 1 for d in findings)
    fixed = fix(source)
    try:
        compile(source, "f.py", "exec")
    except SyntaxError:
        return
    compile(fixed, "f.py", "exec")
    left = check_formula_module(parse_module("f.py", fixed), fixed, OPERATORS)
    assert [d for d in left if d.fix] == []


def test_names_rebound_after_the_intermediate_block_the_fix() -> None:
    before = src('''
        from formulas import at, derivative


        @derivative("mul.Tensor(Tensor self, Tensor other) -> Tensor")
        def mul(self, other):
            result = at.mul(self, other)
            n = self.sizes()
            t = at.sum(self, n)
            n = other.sizes()
            def backward(grad):
                return grad * t * n[0], grad * self
            return result, backward
    ''')
    [finding] = [d for d in check_formula_module(parse_module("f.py", before), before, OPERATORS)]
    assert (finding.code, finding.fix) == ("DB100", None)
    assert fix(before) == before


def test_rebound_inputs_are_not_replayed() -> None:
    before = src('''
        from formulas import at, derivative


        @derivative("exp(Tensor self) -> Tensor")
        def exp(self):
            self = at.mul(self, 1.0)
            result = at.exp(self)
            t = at.exp(self)
            def backward(grad):
                return grad * t
            return result, backward
    ''')
    assert fix(before) == before


def test_an_intermediate_changed_in_place_is_not_recomputed() -> None:
    """Replaying ``c = at.cos(self)`` alone would drop the in-place write after it (a silently
    wrong backward): such a capture gets no fix."""
    for write in ("c.mul_(2)", "at.mul_(c, 2)"):
        before = src(f'''
            from formulas import at, derivative


            @derivative("sin(Tensor self) -> Tensor")
            def sin(self):
                result = at.sin(self)
                c = at.cos(self)
                {write}
                def backward(grad):
                    return grad * c
                return result, backward
        ''')
        assert ("DB100", 10, 23) in lint(before)
        assert fix(before) == before
