"""The ctx-style rules on hand-written fixtures: exact (code, line, col) of every finding.

A fixture line ending in ``# expect: CODE:col=N`` must produce exactly that
finding; every other line must produce nothing.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from lint.fixture_expectations import expectations
from transpiler.lint.ctx.forward import ForwardAnalysis
from transpiler.lint.ctx.names import ImportTable
from transpiler.lint.ctx.values import Role, Value
from transpiler.lint.file_check import check_file
from transpiler.lint.runner import lint

FIXTURES = Path(__file__).parent / "fixtures" / "ctx"

FIXTURE_FILES = sorted(FIXTURES.glob("*.py"))


def test_every_rule_has_a_fixture():
    names = {p.stem for p in FIXTURE_FILES}
    assert {"db100", "db101", "db102", "db104", "once_differentiable", "tutorial"} <= names


@pytest.mark.parametrize("fixture", FIXTURE_FILES, ids=lambda p: p.stem)
def test_fixture_findings_are_exactly_the_expected_ones(fixture: Path):
    found = {(d.code, d.line, d.col) for d in lint([str(fixture)]).diagnostics}
    assert found == expectations(fixture.read_text())


def test_tutorial_functions_are_all_silent_and_all_analysed():
    report = check_file(str(FIXTURES / "tutorial.py"))
    assert report.diagnostics == ()
    assert report.functions == 9


def test_only_autograd_functions_are_analysed():
    # db100.py: 9 Function subclasses (aliases, InplaceFunction, a local subclass) and one plain class
    assert check_file(str(FIXTURES / "db100.py")).functions == 9


def test_messages_name_the_kept_values_and_the_way_out():
    by_line = {d.line: d for d in lint([str(FIXTURES / "db100.py")]).diagnostics}
    message = by_line[18].message
    assert "`expx` (computed at line 16)" in message and "`expnegx` (computed at line 17)" in message
    assert "recompute it in backward" in message and "@once_differentiable" in message
    assert by_line[33].message.startswith("ctx.parts = keeps `c` (computed at line 30)")   # the element of the list


def test_messages_tell_opaque_kernels_from_differentiable_backwards():
    by_line = {d.line: d for d in lint([str(FIXTURES / "messages.py")]).diagnostics}
    triton, extension, branches = by_line[13], by_line[28], by_line[43]
    assert triton.message.startswith("ctx.save_for_backward keeps `rstd` (computed at line 12)")
    assert "backward calls `_rms_norm_backward_kernel[x.shape[0],]` (line 20), which autograd cannot " \
           "differentiate, so double backward cannot work whatever is saved: mark backward " \
           "@once_differentiable" in triton.message
    assert "silently wrong" not in triton.message
    assert "`my_extension_cuda.backward` (line 33)" in extension.message
    assert "silently wrong; save inputs/outputs and recompute it in backward" in branches.message
    assert "cannot differentiate" not in branches.message


def test_one_finding_per_root_cause_with_the_other_sites_related():
    (finding,) = [d for d in lint([str(FIXTURES / "messages.py")]).diagnostics if 40 <= d.line < 60]
    assert finding.related == ((45, 13), (47, 13))
    assert finding.message.endswith("(the same value is also kept at lines 45, 47)")
    assert finding.as_json()["related"] == [{"line": 45, "col": 13}, {"line": 47, "col": 13}]


def lint_source(tmp_path: Path, source: str) -> set[tuple[str, int, int]]:
    path = tmp_path / "case.py"
    path.write_text(source)
    return {(d.code, d.line, d.col) for d in lint([str(path)]).diagnostics}


HEADER = "import torch\n\nclass F(torch.autograd.Function):\n    @staticmethod\n"


def test_output_rebound_after_saving_is_an_intermediate(tmp_path: Path):
    source = HEADER + (
        "    def forward(ctx, x):\n"
        "        out = x.exp()\n"
        "        ctx.save_for_backward(out)\n"        # line 7: this `out` is not what is returned
        "        out = out * 2\n"
        "        return out\n"
        "    @staticmethod\n"
        "    def backward(ctx, g):\n"
        "        (out,) = ctx.saved_tensors\n"
        "        return g * out\n")
    assert lint_source(tmp_path, source) == {("DB100", 7, 9)}


def test_loop_and_in_place_accumulation_into_a_constant_buffer(tmp_path: Path):
    source = HEADER + (
        "    def forward(ctx, x, n):\n"
        "        acc = torch.zeros_like(x)\n"
        "        for _ in range(n):\n"
        "            acc.add_(x.sin())\n"
        "        ctx.save_for_backward(acc)\n"        # line 9: zeros_like filled from x
        "        return x.clone()\n"
        "    @staticmethod\n"
        "    def backward(ctx, g):\n"
        "        return g * ctx.saved_tensors[0], None\n")
    assert lint_source(tmp_path, source) == {("DB100", 9, 9)}


def test_undecidable_values_stay_silent(tmp_path: Path):
    source = HEADER + (
        "    def forward(ctx, x, k):\n"
        "        y = helper(x)\n"
        "        ctx.k2 = k * 2\n"                      # k may be an int: not a tensor for sure
        "        ctx.save_for_backward(y, *extra_tensors(x))\n"
        "        return x.clone()\n"
        "    @staticmethod\n"
        "    def backward(ctx, g):\n"
        "        return g * ctx.k2, None\n")
    assert lint_source(tmp_path, source) == set()


def test_integer_cast_and_comparison_results_carry_no_gradient(tmp_path: Path):
    source = HEADER + (
        "    def forward(ctx, x):\n"
        "        idx = x.argmax(dim=1)\n"
        "        mask = (x > 0) & (x < 1)\n"
        "        as_long = x.to(torch.long)\n"
        "        ctx.save_for_backward(idx, mask, as_long)\n"
        "        return x.clone()\n"
        "    @staticmethod\n"
        "    def backward(ctx, g):\n"
        "        return g\n")
    assert lint_source(tmp_path, source) == set()


def test_augmented_assignment_on_a_tensor_is_in_place_so_the_output_keeps_its_identity(tmp_path: Path):
    source = HEADER + (
        "    def forward(ctx, x, bias):\n"
        "        out = x.exp()\n"
        "        ctx.save_for_backward(out)\n"
        "        out += bias\n"
        "        return out\n"
        "    @staticmethod\n"
        "    def backward(ctx, g):\n"
        "        return g * ctx.saved_tensors[0], g\n")
    assert lint_source(tmp_path, source) == set()


def test_a_save_inside_a_loop_is_reported_once_naming_each_value_once(tmp_path: Path):
    source = HEADER + (
        "    def forward(ctx, x, n):\n"
        "        y = x.sin()\n"
        "        for _ in range(n):\n"
        "            ctx.save_for_backward(y)\n"
        "            y = y.sin()\n"
        "        return x.clone()\n"
        "    @staticmethod\n"
        "    def backward(ctx, g):\n"
        "        return g * ctx.saved_tensors[0], None\n")
    path = tmp_path / "loop.py"
    path.write_text(source)
    (diagnostic,) = lint([str(path)]).diagnostics
    assert (diagnostic.code, diagnostic.line, diagnostic.col) == ("DB100", 8, 13)
    assert diagnostic.message.count("`y`") == 1


def test_relative_imports_resolve_against_the_package(tmp_path: Path):
    package = tmp_path / "torch" / "autograd"
    package.mkdir(parents=True)
    (tmp_path / "torch" / "__init__.py").write_text("")
    (package / "__init__.py").write_text("")
    (package / "mine.py").write_text(
        "from .function import Function, once_differentiable\n"
        "from ..autograd import function as fn\n\n"
        "class A(Function):\n"
        "    @staticmethod\n"
        "    def forward(ctx, x):\n"
        "        ctx.save_for_backward(x.exp())\n"
        "        return x.clone()\n\n"
        "class B(fn.InplaceFunction):\n"
        "    @staticmethod\n"
        "    def forward(ctx, x):\n"
        "        ctx.save_for_backward(x.exp())\n"
        "        return x.clone()\n"
        "    @staticmethod\n"
        "    @once_differentiable\n"
        "    def backward(ctx, g):\n"
        "        return g\n")
    result = lint([str(package / "mine.py")])
    assert result.functions == 2
    assert [(d.code, d.line) for d in result.diagnostics] == [("DB100", 7)]


def write_package(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def test_intermediates_and_bases_are_followed_across_the_linted_tree(tmp_path: Path):
    write_package(tmp_path / "pkg", {
        "__init__.py": "from .helpers import normalize\n",
        "helpers.py": (
            "def normalize(x):\n"
            "    rstd = x.pow(2).mean(-1, keepdim=True).rsqrt()\n"
            "    return x * rstd, rstd\n"),
        "base.py": (
            "import torch\n\n"
            "class Base(torch.autograd.Function):\n"
            "    @staticmethod\n"
            "    def backward(ctx, grad):\n"
            "        (kept,) = ctx.saved_tensors\n"
            "        return grad * kept\n"),
        "impl.py": (
            "from pkg import normalize\n"
            "from pkg.base import Base\n\n"
            "class Impl(Base):\n"
            "    @staticmethod\n"
            "    def forward(ctx, x):\n"
            "        y, rstd = normalize(x)\n"
            "        ctx.save_for_backward(rstd)\n"          # line 8: rstd comes from helpers.py
            "        return y\n"),
    })
    result = lint([str(tmp_path)])
    assert result.functions == 2
    (finding,) = result.diagnostics
    assert (Path(finding.path).name, finding.line, finding.code) == ("impl.py", 8, "DB100")
    assert "`rstd` (computed at " in finding.message
    assert "helpers.py:2 in `normalize`, called at line 7)" in finding.message     # the call that is the cause


def test_rng_state_is_not_listed_among_the_kept_intermediates():
    # xformers' flash-attn findings listed `rng_state`, the integer seed and offset, as kept
    (finding,) = lint([str(FIXTURES / "rng_state.py")]).diagnostics
    assert finding.message.startswith("ctx.save_for_backward keeps `lse` (computed at line 43), neither")


def test_a_followed_function_of_another_file_calls_that_files_own_functions(tmp_path: Path):
    # a bare name inside kernels.py names kernels.py's function, not one of the forward's module
    write_package(tmp_path / "pkg", {
        "__init__.py": "",
        "kernels.py": (
            "import torch\n\n"
            "def _launch(x):\n"
            "    out = torch.empty_like(x)\n"
            "    cumsum_kernel[(1,)](x, out)\n"
            "    return out\n\n"
            "def _count(x):\n"
            "    return torch.empty_like(x, dtype=torch.int64)\n\n"
            "def scan(x):\n"
            "    return _launch(x=x)\n\n"
            "def count(x):\n"
            "    return _count(x)\n"),
        "impl.py": (
            "import torch\n"
            "from pkg.kernels import count, scan\n\n"
            "def _launch(x):\n"
            "    return None\n\n"
            "class Scan(torch.autograd.Function):\n"
            "    @staticmethod\n"
            "    def forward(ctx, x):\n"
            "        s = scan(x)\n"
            "        ctx.save_for_backward(s)\n"              # line 11: a kernel output of kernels.py
            "        return s.sum(-1)\n\n"
            "    @staticmethod\n"
            "    def backward(ctx, g):\n"
            "        (s,) = ctx.saved_tensors\n"
            "        return g.unsqueeze(-1) * s\n\n"
            "class Count(torch.autograd.Function):\n"
            "    @staticmethod\n"
            "    def forward(ctx, x):\n"
            "        n = count(x)\n"
            "        ctx.save_for_backward(n)\n"              # integer: no gradient path, silent
            "        return x * 2\n\n"
            "    @staticmethod\n"
            "    def backward(ctx, g):\n"
            "        (n,) = ctx.saved_tensors\n"
            "        return g * n\n"),
    })
    result = lint([str(tmp_path)])
    assert result.functions == 2
    (finding,) = result.diagnostics
    assert (Path(finding.path).name, finding.line, finding.code) == ("impl.py", 11, "DB100")
    assert "kernels.py:4" in finding.message


def test_a_buffer_and_a_tensor_from_one_site_are_told_the_same_way_in_any_order():
    # `dx = torch.zeros_like(x) if flag else None` filled in a loop: both values reach the save
    # (fla's fused_kl_div); the message must not depend on the order of the set holding them
    analysis = ForwardAnalysis(ImportTable("", {}), frozenset())
    buffer, computed = Value(Role.CONSTANT, site=(129, 4)), Value(Role.TENSOR, site=(129, 4))
    told = "created at line 129, then written in place with values computed from the inputs"
    assert analysis.origin([buffer, computed]) == analysis.origin([computed, buffer]) == told


def test_an_extension_held_in_a_module_global_is_named_as_the_cause():
    by_line = {d.line: d for d in lint([str(FIXTURES / "messages.py")]).diagnostics}
    assert "backward calls `_C.backward` (line 83), which autograd cannot differentiate" in by_line[77].message
    assert "silently wrong" not in by_line[77].message


def test_a_backward_helper_of_another_file_is_opaque_only_when_it_reaches_a_kernel(tmp_path: Path):
    # pytorch-wavelets: backward calls `inv_j1`, torch code of another module (whose own helper
    # computes padding indices with numpy); the message called it a call autograd cannot
    # differentiate. A helper that launches a kernel two calls down still is one.
    write_package(tmp_path / "pkg", {
        "__init__.py": "",
        "low.py": (
            "import numpy as np\n"
            "import torch.nn.functional as F\n\n"
            "def pad_indices(n):\n"
            "    return np.arange(-1, n + 1)\n\n"
            "def filt(x, h):\n"
            "    return F.conv1d(x[..., pad_indices(x.shape[-1])], h)\n\n"
            "def launch(x):\n"
            "    out = x.new_empty(x.shape)\n"
            "    kernel[(1,)](x, out)\n"
            "    return out\n"),
        "transforms.py": (
            "from pkg.low import filt, launch\n\n"
            "def inverse(x, h):\n"
            "    return filt(x, h)\n\n"
            "def fused_inverse(x, h):\n"
            "    return launch(filt(x, h))\n"),
        "layer.py": (
            "import torch\n"
            "from pkg.transforms import fused_inverse, inverse\n\n"
            "class Magnitude(torch.autograd.Function):\n"
            "    @staticmethod\n"
            "    def forward(ctx, x, h):\n"
            "        r = x.abs() + 1\n"
            "        ctx.save_for_backward(h, x / r)\n"       # line 8
            "        return r\n\n"
            "    @staticmethod\n"
            "    def backward(ctx, g):\n"
            "        h, drdx = ctx.saved_tensors\n"
            "        return inverse(g * drdx, h), None\n\n"
            "class FusedMagnitude(torch.autograd.Function):\n"
            "    @staticmethod\n"
            "    def forward(ctx, x, h):\n"
            "        r = x.abs() + 1\n"
            "        ctx.save_for_backward(h, x / r)\n"       # line 20
            "        return r\n\n"
            "    @staticmethod\n"
            "    def backward(ctx, g):\n"
            "        h, drdx = ctx.saved_tensors\n"
            "        return fused_inverse(g * drdx, h), None\n"),
    })
    by_line = {d.line: d for d in lint([str(tmp_path / "pkg")]).diagnostics if d.path.endswith("layer.py")}
    assert "silently wrong" in by_line[8].message and "cannot differentiate" not in by_line[8].message
    assert "backward calls `fused_inverse` (line 26), which autograd cannot differentiate" in by_line[20].message
