"""Fuzzing the capture rule with formulas whose answer is known by construction.

Hypothesis writes a formula: forward statements that make inputs' aliases,
intermediates (operator results, tuple unpacking, both arms of a branch),
metadata (``sizes()``, ``dim()``, arithmetic on them) and value-read scalars
(``item()``, ``tolist()``); then a backward that captures some of those names,
directly or from closures nested in it, some only through their metadata,
and assigns others (which makes them its own locals, not captures). Each name's kind is tracked as it is built, so the
findings are known: lint must report exactly the captured intermediates,
aliases and value-read scalars (DB100, with the matching message), nothing
for inputs, outputs and metadata. ``transpile`` on the same formula (and on
truncated copies of it) must answer with an exit code, never a traceback,
and leave its output directory byte-identical whenever it refuses.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from transpiler.cpp import generate
from transpiler.lint.runner import lint_paths

SETTINGS = settings(max_examples=100, deadline=5000, derandomize=True,
                    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])

# what a captured name is, and what lint must say about it (None: nothing)
EXPECTED_MESSAGE = {
    "input": None,
    "output": None,
    "metadata": None,
    "intermediate": "is a tensor computed in the forward",
    "value": "is read from a tensor's values",
    "merged": "is a tensor computed in the forward",   # a branch joining two tensors: no single name to use
}
TENSOR_KINDS = ("input", "output", "intermediate", "alias", "merged")


@dataclass
class Forward:
    """The forward being built: its lines and each name's kind (``alias:self`` for an alias of ``self``)."""

    lines: list[str] = field(default_factory=list)
    kinds: dict[str, str] = field(default_factory=lambda: {"self": "input", "other": "input", "dim": "metadata",
                                                           "result": "output"})

    def fresh(self) -> str:
        return f"n{len(self.kinds)}"

    def names(self, *kinds: str) -> list[str]:
        return [n for n, k in self.kinds.items() if k.split(":")[0] in kinds]


def alias_kind(forward: Forward, source: str) -> str:
    """The kind of a plain copy ``n = source``."""
    kind = forward.kinds[source]
    if kind in ("input", "output"):
        return f"alias:{source}"
    return kind


@st.composite
def forwards(draw) -> Forward:
    forward = Forward(["result = at.mul(self, other)"])
    for _ in range(draw(st.integers(1, 8))):
        tensors = forward.names(*TENSOR_KINDS)
        statement = draw(st.sampled_from(["op", "binary", "alias", "unpack", "branch", "metadata", "item",
                                          "arithmetic"]))
        name = forward.fresh()
        if statement == "op":
            source = draw(st.sampled_from(tensors))
            forward.lines.append(f"{name} = at.{draw(st.sampled_from(['sin', 'exp', 'neg']))}({source})")
            forward.kinds[name] = "intermediate"
        elif statement == "binary":
            left, right = draw(st.sampled_from(tensors)), draw(st.sampled_from(tensors))
            forward.lines.append(f"{name} = at.mul({left}, {right})")
            forward.kinds[name] = "intermediate"
        elif statement == "alias":
            source = draw(st.sampled_from(tensors))
            forward.lines.append(f"{name} = {source}")
            forward.kinds[name] = alias_kind(forward, source)
        elif statement == "unpack":
            first, second = draw(st.sampled_from(tensors)), draw(st.sampled_from(tensors))
            kinds = alias_kind(forward, first), alias_kind(forward, second)
            forward.kinds[name] = kinds[0]
            other_name = forward.fresh()
            forward.kinds[other_name] = kinds[1]
            forward.lines.append(f"{name}, {other_name} = {first}, {second}")
        elif statement == "branch":
            pool = draw(st.sampled_from([tensors, forward.names("metadata")]))
            first, second = draw(st.sampled_from(pool)), draw(st.sampled_from(pool))
            forward.lines += ["if dim > 0:", f"    {name} = {first}", "else:", f"    {name} = {second}"]
            arms = {forward.kinds[first].split(":")[0], forward.kinds[second].split(":")[0]}
            forward.kinds[name] = ("metadata" if arms == {"metadata"} else
                                   "intermediate" if arms == {"intermediate"} else "merged")
        elif statement == "metadata":
            source = draw(st.sampled_from(tensors))
            method = draw(st.sampled_from(["sizes()", "dim()", "numel()", "size(0)"]))
            forward.lines.append(f"{name} = {source}.{method}")
            forward.kinds[name] = "metadata"
        elif statement == "item":
            source = draw(st.sampled_from(tensors))
            method = draw(st.sampled_from(["sum().item()", "tolist()"]))
            forward.lines.append(f"{name} = {source}.{method}")
            forward.kinds[name] = "value"
        else:
            source = draw(st.sampled_from(forward.names("metadata", "value")))
            forward.lines.append(f"{name} = {source} * 2" if draw(st.booleans()) else f"{name} = {source}")
            forward.kinds[name] = "value" if forward.kinds[source] == "value" else "metadata"
    return forward


@dataclass(frozen=True)
class Case:
    source: str
    expected: dict[str, str]      # captured name -> expected DB100 message fragment (only the findings)


@st.composite
def cases(draw) -> Case:
    forward = draw(forwards())
    captured = draw(st.lists(st.sampled_from(sorted(forward.kinds)), min_size=1, max_size=6, unique=True))
    depths = {name: draw(st.integers(0, 2)) for name in captured}
    # a tensor the backward reads only through metadata (``n.dim()``): still a capture of the tensor
    tensors = set(forward.names(*TENSOR_KINDS))
    metadata_use = {name for name in captured if name in tensors and draw(st.booleans())}
    # a name the backward assigns is its own local everywhere inside it: never a capture
    shadowed = set(draw(st.lists(st.sampled_from(captured), max_size=2, unique=True))) - {"self", "other", "dim"}

    def uses(depth: int) -> str:
        return ", ".join(f"{n}.dim()" if n in metadata_use else n for n in captured if depths[n] == depth)

    backward = ["    def backward(grad):", *(f"        {name} = grad" for name in sorted(shadowed))]
    indent = "        "
    for depth in (1, 2):       # nested closures: backward > inner1 > inner2
        backward.append(f"{indent}def inner{depth}(g):")
        indent += "    "
    for depth in (2, 1):
        backward.append(f"{indent}keep{depth} = [{uses(depth)}]")
        backward.append(f"{indent}return g" if depth == 2 else f"{indent}return inner2(g)")
        indent = indent[:-4]
    backward.append(f"{indent}keep0 = [{uses(0)}]")
    backward.append(f"{indent}return inner1(grad), grad")
    source = "\n".join([
        "from formulas import at, derivative",
        "",
        "",
        '@derivative("fz(Tensor self, Tensor other, int dim) -> Tensor")',
        "def fz(self, other, dim):",
        *(f"    {line}" for line in forward.lines),
        *backward,
        "    return result, backward",
        "",
    ])
    expected = {}
    for name in set(captured) - shadowed:
        kind = forward.kinds[name]
        if kind.startswith("alias:"):
            expected[name] = f"a forward alias of `{kind.split(':')[1]}`"
        elif kind in ("intermediate", "merged") and name in metadata_use:
            expected[name] = "a tensor computed in the forward, only for its metadata"
        elif EXPECTED_MESSAGE[kind] is not None:
            expected[name] = EXPECTED_MESSAGE[kind]
    return Case(source, expected)


CAPTURED = re.compile(r"DB100 backward captures `(\w+)`")
TRANSPILE_REFUSAL = re.compile(r":\d+:\d+: DB2\d\d ")


def lint_source(tmp_path: Path, source: str) -> list[str]:
    path = tmp_path / "fz.py"
    path.write_text(source)
    return [finding.format() for finding in lint_paths([str(path)])]


@SETTINGS
@given(case=cases())
def test_lint_reports_exactly_the_intermediates(tmp_path_factory, case: Case):
    findings = lint_source(tmp_path_factory.mktemp("fuzz"), case.source)
    found = {}
    for line in findings:
        if TRANSPILE_REFUSAL.search(line):
            continue        # what transpile refuses (nested closures, tensor methods) lint reports too, as
                            # DB2xx (tests/lint/test_lint_agrees_with_transpile.py); not a capture finding
        match = CAPTURED.search(line)
        assert match, f"unexpected finding {line}\n{case.source}"
        found[match[1]] = line
    assert set(found) == set(case.expected), case.source + "\n" + "\n".join(findings)
    for name, fragment in case.expected.items():
        assert fragment in found[name], f"{found[name]}\n{case.source}"


def tree(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def workspace(tmp_path_factory) -> tuple[Path, Path]:
    """A package and an output directory transpile wrote before (what a refused run must leave alone)."""
    root = tmp_path_factory.mktemp("fuzz_transpile")
    package, out = root / "fuzzpkg", root / "out_cpp"
    package.mkdir()
    (package / "fz.py").write_text(
        'from formulas import at, derivative\n\n\n@derivative("fz(Tensor self, Tensor other, int dim) -> Tensor")\n'
        "def fz(self, other, dim):\n    result = at.mul(self, other)\n    def backward(grad):\n"
        "        return grad * other, grad * self\n    return result, backward\n")
    assert generate.main(["--formulas", str(package), "--out", str(out)]) == 0
    return package, out


@settings(SETTINGS, max_examples=25, deadline=10000)   # transpile also parses the shipped library
@given(case=cases(), cut=st.one_of(st.none(), st.floats(0.0, 1.0)))
def test_transpile_answers_without_traceback_and_refusals_touch_nothing(workspace, capsys, case: Case, cut):
    package, out = workspace
    source = case.source if cut is None else case.source[:int(len(case.source) * cut)]
    (package / "fz.py").write_text(source)
    before = tree(out)
    status = generate.main(["--formulas", str(package), "--out", str(out)])
    printed = capsys.readouterr()
    assert status in (0, 1, 2) and "Traceback" not in printed.out + printed.err
    if status != 0:
        assert tree(out) == before, source
    if case.expected and cut is None:
        assert status == 1 and "DB100" in printed.out
