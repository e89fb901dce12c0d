"""The ``transpile`` command: diagnostics on bad input, atomic and deterministic output, --check."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from transpiler import output
from transpiler.cpp import generate

REPO = Path(__file__).resolve().parents[2]

GOOD = '''\
from formulas import at, derivative


@derivative("sin(Tensor self) -> Tensor")
def sin(self):
    result = at.sin(self)
    def backward(grad):
        return grad * at.cos(self)
    return result, backward


@derivative("cos(Tensor self) -> Tensor")
def cos(self):
    result = at.cos(self)
    def backward(grad):
        return -grad * at.sin(self)
    return result, backward
'''

BAD_INPUTS = {
    # a construct outside the dialect (lint-clean, but not transliterable)
    "unsupported": ("    def backward(grad):\n        return grad * at.cos(self)\n",
                    "    def backward(grad):\n        scale = {1: 2.0}\n        return grad * at.cos(self)\n",
                    "DB200", 8, 17),
    # an operator the library does not declare (forward code, which the linter does not check)
    "unknown operator": ("    result = at.sin(self)\n", "    result = at.special_bessel_j0(self)\n", "DB201", 6, 14),
    # a schema type with no C++ spelling here (reported at the formula)
    "unsupported schema type": ('"cos(Tensor self) -> Tensor")\ndef cos(self):',
                                '"cos(Tensor self, Dimname name) -> Tensor")\n'
                                'def cos(self, name):', "DB205", 12, 13),
    "duplicate operator": ('@derivative("cos(Tensor self) -> Tensor")', '@derivative("sin(Tensor self) -> Tensor")',
                           "DB206", 12, 13),
    # a Tensor[] output: the backward's parameter is the list of gradients, not a tensor
    "list output's gradient used as a tensor": ('"cos(Tensor self) -> Tensor"', '"cos(Tensor self) -> Tensor[]"',
                                                "DB200", 16, 16),
    # a Tensor[] output returned as a Tensor (reported at the returned name)
    "list output returned as a tensor": ('"cos(Tensor self) -> Tensor")\ndef cos(self):\n    result = at.cos(self)\n'
                                         '    def backward(grad):\n        return -grad * at.sin(self)',
                                         '"cos(Tensor self) -> Tensor[]")\ndef cos(self):\n    result = at.sin(self)\n'
                                         '    def backward(grads):\n        return at.sin(grads[0])',
                                         "DB200", 17, 12),
}


@pytest.fixture
def workspace(tmp_path: Path) -> tuple[Path, Path]:
    formulas = tmp_path / "formulas"
    formulas.mkdir()
    (formulas / "trig.py").write_text(GOOD)
    out = tmp_path / "out_cpp"
    assert generate.main(["--formulas", str(formulas), "--out", str(out)]) == 0
    return formulas, out


def snapshot(directory: Path) -> dict[str, tuple[bytes, int]]:
    return {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in sorted(directory.iterdir())}


def test_writes_nodes_helpers_and_registrations(workspace):
    _, out = workspace
    source = (out / "trig.cpp").read_text()
    assert "@generated" in source
    assert "struct SinBackward0 : public torch::autograd::TraceableFunction" in source
    assert "self_ = torch::autograd::SavedVariable(self, false);" in source
    assert 'm.def("sin(Tensor self) -> Tensor", TORCH_FN(formulas::sin));' in source
    # override(compiled=True)'s registrar of the kernel for aten::sin (aten_override.h)
    assert ('{"sin", +[](torch::Library& m, c10::DispatchKey key) { m.impl("sin", torch::dispatch(key, '
            'TORCH_FN(formulas::sin))); }},') in source
    assert {"runtime.h", "helpers.h", "helpers.cpp", "aten_override.h", "aten_override.cpp", "trig.cpp",
            "MANIFEST"} == {p.name for p in out.iterdir()}


def test_two_runs_give_identical_bytes(workspace, tmp_path):
    formulas, out = workspace
    again = tmp_path / "again"
    assert generate.main(["--formulas", str(formulas), "--out", str(again), "--no-lint"]) == 0
    first, second = snapshot(out), snapshot(again)
    assert first.keys() == second.keys()
    for name in first:
        if name == "MANIFEST":   # its generator line hashes transpiler/, which may be edited meanwhile
            assert _without_generator(first[name][0]) == _without_generator(second[name][0])
        else:
            assert first[name][0] == second[name][0], name


def _without_generator(manifest: bytes) -> list[bytes]:
    return [line for line in manifest.splitlines() if not line.startswith(b"generator ")]


def test_nothing_changed_leaves_files_untouched(workspace, capsys):
    formulas, out = workspace
    before = snapshot(out)
    assert generate.main(["--formulas", str(formulas), "--out", str(out)]) == 0
    assert "up to date" in capsys.readouterr().out
    assert snapshot(out) == before


def test_check(workspace):
    formulas, out = workspace
    assert generate.main(["--formulas", str(formulas), "--out", str(out), "--check"]) == 0
    (out / "trig.cpp").write_text((out / "trig.cpp").read_text() + "// edited by hand\n")
    assert generate.main(["--formulas", str(formulas), "--out", str(out), "--check"]) == 1
    assert "// edited by hand" in (out / "trig.cpp").read_text()   # --check writes nothing


@pytest.mark.parametrize("name", sorted(BAD_INPUTS))
def test_bad_input_gives_its_diagnostic_and_writes_nothing(workspace, capsys, name):
    formulas, out = workspace
    old, new, code, line, col = BAD_INPUTS[name]
    assert old in GOOD
    (formulas / "trig.py").write_text(GOOD.replace(old, new, 1))
    before = snapshot(out)
    capsys.readouterr()
    assert generate.main(["--formulas", str(formulas), "--out", str(out)]) == 1
    printed = capsys.readouterr().out
    assert f"trig.py:{line}:{col}: {code} " in printed
    assert snapshot(out) == before


def test_malformed_schema_gives_its_diagnostic_and_writes_nothing(workspace, capsys):
    formulas, out = workspace
    (formulas / "trig.py").write_text(GOOD.replace('"sin(Tensor self) -> Tensor"', '"sin(Tensor self -> Tensor"'))
    before = snapshot(out)
    capsys.readouterr()
    assert generate.main(["--formulas", str(formulas), "--out", str(out)]) == 1
    printed = capsys.readouterr().out
    assert "trig.py:4:" in printed and "DB107" in printed
    assert snapshot(out) == before


@pytest.mark.parametrize("step", ["_exchange", "_keep"])
def test_failed_write_leaves_output_as_it_was(workspace, monkeypatch, step):
    formulas, out = workspace
    (formulas / "trig.py").write_text(GOOD.replace("grad * at.cos(self)", "at.cos(self) * grad"))
    before = snapshot(out)

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(output, step, interrupted)
    with pytest.raises(KeyboardInterrupt):
        generate.main(["--formulas", str(formulas), "--out", str(out)])
    assert snapshot(out) == before
    assert [p.name for p in out.parent.iterdir() if p.name.startswith(".out_cpp")] == []


def test_shipped_out_cpp_is_current():
    """The checked-in out_cpp/ is what transpile writes for formulas/ (byte for byte)."""
    result = generate.generate(REPO / "formulas", lint=False)
    assert result.diagnostics == ()
    assert generate.differs(REPO / "out_cpp", result.files, manifest=False) == []


def test_shipped_manifest_is_current():
    """The README's first command finds out_cpp/ up to date in a fresh clone and rewrites nothing:
    the checked-in MANIFEST records the hashes of today's formulas and transpiler (after changing
    either, run ``python -m transpiler`` and commit its MANIFEST)."""
    assert generate.up_to_date(REPO / "formulas", REPO / "out_cpp", "formulas")


def test_output_does_not_depend_on_hash_seed(tmp_path):
    """Byte-identical across processes (set and dict orders must not leak into the C++)."""
    outputs = []
    for seed in ("1", "2"):
        out = tmp_path / f"seed{seed}"
        env = {**os.environ, "PYTHONHASHSEED": seed}
        done = subprocess.run([sys.executable, "-m", "transpiler", "--formulas", str(REPO / "formulas"),
                               "--out", str(out), "--no-lint"], cwd=REPO, env=env, capture_output=True, text=True)
        assert done.returncode == 0, done.stdout + done.stderr
        outputs.append({p.name: p.read_bytes() for p in out.iterdir() if p.name != "MANIFEST"})
    assert outputs[0] == outputs[1]


NEG = '''\
from formulas import at, derivative


@derivative("neg(Tensor self) -> Tensor")
def neg(self):
    result = at.neg(self)
    def backward(grad):
        return at.neg(grad)
    return result, backward
'''


def test_modules_of_the_same_name_get_distinct_files(workspace):
    formulas, out = workspace
    (formulas / "extra").mkdir()
    (formulas / "extra" / "trig.py").write_text(NEG)
    assert generate.main(["--formulas", str(formulas), "--out", str(out)]) == 0
    sources = {p.name: p.read_text() for p in out.glob("*.cpp")}
    assert set(sources) == {"aten_override.cpp", "helpers.cpp", "trig.cpp", "trig_2.cpp"}
    assert "NegBackward0" in sources["trig.cpp"] and "SinBackward0" in sources["trig_2.cpp"]   # path order
