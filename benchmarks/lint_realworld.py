"""``transpile lint`` on real ``torch.autograd.Function`` code from the package index: precision and recall.

Downloads the pinned packages below (``pip download --no-deps``: a wheel, or the
sdist where there is no pure wheel; never installed, never imported), unpacks
them, lints every file, and scores the findings against the judgements kept in
``benchmarks/lint_realworld.json``:

- every finding (package, path, line, code) was judged by reading the code:
  ``S`` (silently wrong: backward is differentiable torch code that uses a kept
  tensor with a gradient path to a differentiable input, neither an input nor
  an output, so double backward drops that dependence), ``P`` (in principle:
  the same keeping, but backward launches kernels or extension calls, so
  double backward cannot work, and backward is not ``@once_differentiable``)
  or ``FP``, each with its reason; precision = (S + P) / (S + P + FP);
- a random sample of the Functions the linter leaves silent was read too:
  ``hazard`` (missed) or ``safe``; sampled recall = Functions with a finding /
  (those + missed hazards scaled from the sample to all silent Functions).

A finding or a sampled Function with no judgement is listed as unjudged (a new
finding after a change of the linter is to be judged, not counted). Not part of
the test suite: it needs the network (or a warm ``--cache``).

``--compare-prefilter`` also lints the corpus with the text prefilter switched
off (every file through the full analysis) and prints whether the findings are
identical, and the time of each run.

Run: ``python benchmarks/lint_realworld.py [--cache DIR] [--sample-new N] [--compare-prefilter]``.
"""
from __future__ import annotations

import argparse
import ast
import json
import random
import subprocess
import sys
import tarfile
import zipfile
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
JUDGEMENTS = Path(__file__).with_suffix(".json")
sys.path.insert(0, str(REPO))

from transpiler.lint.runner import lint  # noqa: E402  (after the path is set)

# (package, version): every one defines custom autograd Functions
PACKAGES = [
    ("liger-kernel", "0.8.5"), ("fla-core", "0.6.0"), ("xformers", "0.0.27.post2"),
    ("torch-scatter", "2.1.2"), ("kornia", "0.9.0"), ("gpytorch", "1.15.2"), ("pyro-ppl", "1.9.2"),
    ("torchdiffeq", "0.2.5"), ("entmax", "1.3"), ("unsloth", "2026.10.9"), ("peft", "0.21.2"),
    ("pykeops", "2.3"), ("geomloss", "0.3.1"), ("torchsde", "0.2.6"),
    # grown for issue 23: quantisation, graph and point-cloud ops, renderers, probabilistic
    # programming, scientific ML, spiking networks (surrogate gradients)
    ("bitsandbytes", "0.42.0"), ("torchao", "0.18.0"), ("optimum-quanto", "0.2.7"), ("brevitas", "0.13.4"),
    ("torch-geometric", "2.8.1"), ("torch-harmonics", "0.9.3"), ("neuraloperator", "2.0.0"),
    ("gsplat", "1.5.3"), ("nerfacc", "0.5.3"), ("botorch", "0.18.1"), ("monai", "1.6.1"),
    ("torch-struct", "0.5"), ("sparsemax", "0.1.9"), ("pytorch-wavelets", "1.3.0"), ("torchaudio", "2.11.0"),
    ("snntorch", "1.0.0"), ("spikingjelly", "2.0.0"), ("norse", "0.0.4"),
]


# Hazards confirmed with torch: the class is extracted from the downloaded source into a scratch
# module (never imported from the package) and run under gradcheck and gradgradcheck (CPU, float64).
CONFIRM = [
    ("gpytorch", "gpytorch/variational/large_batch_variational_strategy.py", "QuadFormDiagonal",
     "a = torch.randn(4, 4, dtype=D)\n"
     "inputs = ((a @ a.mT + torch.eye(4, dtype=D)).requires_grad_(), torch.randn(4, 3, dtype=D, requires_grad=True))\n"
     "f = QuadFormDiagonal.apply"),
    ("gpytorch", "gpytorch/functions/_log_normal_cdf.py", "LogNormalCDF",
     "inputs = (torch.tensor([-3.0, -2.0, 0.5, 1.0], dtype=D, requires_grad=True),)\nf = LogNormalCDF.apply"),
    ("gpytorch", "gpytorch/functions/rbf_covariance.py", "RBFCovariance",
     "x1, x2 = torch.randn(4, 2, dtype=D), torch.randn(3, 2, dtype=D)\n"
     "inputs = (torch.tensor([[0.7]], dtype=D, requires_grad=True),)\n"
     "f = lambda lengthscale: RBFCovariance.apply(x1, x2, lengthscale, lambda a, b: torch.cdist(a, b) ** 2)"),
    ("entmax", "entmax/root_finding.py", "EntmaxBisectFunction",
     "x = torch.randn(2, 5, dtype=D)\ninputs = (torch.tensor(1.5, dtype=D, requires_grad=True),)\n"
     "f = lambda alpha: EntmaxBisectFunction.apply(x, alpha, -1, 50)"),
]
CONFIRM_HEADER = ("import math, warnings\nimport torch\nfrom torch import Tensor\nfrom torch.autograd import Function\n"
                  "from torch.distributions import Normal\n"
                  "warnings.simplefilter('ignore')\ntorch.manual_seed(0)\nD = torch.float64\n\n")
CONFIRM_FOOTER = ("\nprint(torch.autograd.gradcheck(f, inputs, raise_exception=False), "
                  "torch.autograd.gradgradcheck(f, inputs, raise_exception=False))\n")


def confirm(roots: dict[str, Path], scratch: Path) -> None:
    """Run each CONFIRM case in a fresh interpreter; print first- and second-order results."""
    scratch.mkdir(parents=True, exist_ok=True)
    for package, path, name, run in CONFIRM:
        source = (roots[package] / path).read_text()
        cls = next(n for n in ast.parse(source).body if isinstance(n, ast.ClassDef) and n.name == name)
        script = scratch / f"confirm_{name}.py"
        script.write_text(CONFIRM_HEADER + ast.get_source_segment(source, cls) + "\n\n" + run + CONFIRM_FOOTER)
        done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, cwd=scratch)
        first, _, second = done.stdout.strip().partition(" ")
        print(f"CONFIRM {package} {path} {name}: gradcheck {first or '?'}, gradgradcheck {second or '?'}"
              + (f" ({done.stderr.strip().splitlines()[-1]})" if done.returncode else ""))


def download(package: str, version: str, cache: Path) -> Path:
    """The unpacked sources of ``package==version`` under ``cache/src`` (downloaded once)."""
    target = cache / "src" / f"{package}-{version}"
    if target.is_dir():
        return target
    archives = cache / "archives"
    spec = f"{package}=={version}"
    wheel = ["--only-binary", ":all:", "--python-version", "3.12", "--platform", "manylinux2014_x86_64",
             "--platform", "manylinux_2_28_x86_64", "--platform", "any"]
    for options in (wheel, ["--no-binary", ":all:", "--no-build-isolation"]):
        done = subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", *options, spec,
                               "-d", str(archives)], capture_output=True, text=True)
        if done.returncode == 0:
            break
    else:
        sys.exit(f"cannot download {spec}:\n{done.stderr}")
    stem = package.replace("-", "_").lower()
    archive = next(p for p in archives.iterdir()
                   if p.name.replace("-", "_").lower().startswith(f"{stem}_{version}".lower()))
    target.mkdir(parents=True)
    if archive.suffix == ".whl":
        with zipfile.ZipFile(archive) as wheel_file:
            wheel_file.extractall(target)
    else:
        with tarfile.open(archive) as sdist:
            sdist.extractall(target, filter="data")
    return target


def function_classes(root: Path) -> list[tuple[str, str, int, int]]:
    """(path, class, first line, last line) of every Function class the linter recognises in a file."""
    from transpiler.lint.ctx.classes import function_classes as classes_of
    from transpiler.lint.ctx.names import import_table

    found = []
    for path in sorted(root.rglob("*.py")):
        try:
            tree = ast.parse(path.read_bytes())
        except (SyntaxError, ValueError):
            continue
        for cls in classes_of(tree, import_table(tree, str(path))):
            found.append((str(path.relative_to(root)), cls.name, cls.lineno, cls.end_lineno or cls.lineno))
    return found


def compare_prefilter(paths: list[str]) -> None:
    """Lint ``paths`` with and without the text prefilter; print whether the findings agree."""
    import time

    from transpiler.lint import prefilter

    timings, results = {}, {}
    for mode in ("with", "without"):
        saved = prefilter.may_define_function, prefilter.may_use_derivative
        if mode == "without":
            prefilter.may_define_function = lambda path, source: True
            prefilter.may_use_derivative = lambda source: True
        start = time.perf_counter()
        try:
            results[mode] = lint(paths, trust_bytecode=False).diagnostics
        finally:
            prefilter.may_define_function, prefilter.may_use_derivative = saved
        timings[mode] = time.perf_counter() - start
    differ = set(results["with"]) ^ set(results["without"])
    print(f"prefilter: {len(results['with'])} findings with it ({timings['with']:.2f} s), "
          f"{len(results['without'])} without it ({timings['without']:.2f} s): "
          + ("identical" if not differ else f"{len(differ)} differ"))
    for diagnostic in sorted(differ):
        print(f"  {'only with' if diagnostic in results['with'] else 'only without'}: {diagnostic.format()[:200]}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cache", type=Path, default=Path("/tmp/lint_realworld"))
    parser.add_argument("--confirm", action="store_true",
                        help="run the CONFIRM cases under gradcheck/gradgradcheck in a scratch directory")
    parser.add_argument("--sample-new", type=int, default=0,
                        help="print N more random silent Functions to judge (seeded)")
    parser.add_argument("--compare-prefilter", action="store_true",
                        help="lint again without the text prefilter and compare the findings")
    args = parser.parse_args(argv)
    judged = json.loads(JUDGEMENTS.read_text())
    verdicts = {(j["package"], j["path"], j["line"], j["code"]): j for j in judged["findings"]}
    sampled = {(j["package"], j["path"], j["class"]): j for j in judged["silent_sample"]}

    roots = {package: download(package, version, args.cache) for package, version in PACKAGES}
    result = lint([str(root) for root in roots.values()])
    if args.compare_prefilter:
        compare_prefilter([str(root) for root in roots.values()])
    counts: Counter[str] = Counter()
    flagged: set[tuple[str, str, int]] = set()     # (package, path, line) of each finding
    for diagnostic in result.diagnostics:
        if diagnostic.code not in ("DB100", "DB101"):
            continue
        package, root = next((p, r) for p, r in roots.items() if diagnostic.path.startswith(str(r)))
        path = str(Path(diagnostic.path).relative_to(root))
        verdict = verdicts.get((package, path, diagnostic.line, diagnostic.code))
        counts[verdict["verdict"] if verdict else "unjudged"] += 1
        flagged.add((package, path, diagnostic.line))
        if verdict is None:
            print(f"UNJUDGED {package} {path}:{diagnostic.line} {diagnostic.code} {diagnostic.message[:160]}")

    silent, found_functions = [], 0
    for package, root in roots.items():
        for path, name, first, last in function_classes(root):
            if any((package, path, line) in flagged for line in range(first, last + 1)):
                found_functions += 1
            else:
                silent.append((package, path, name))
    missed = sum(1 for key in silent if sampled.get(key, {}).get("verdict") == "hazard")
    sample_size = sum(1 for key in silent if key in sampled)
    scale = len(silent) / sample_size if sample_size else 0.0

    hazards = counts["S"] + counts["P"]
    precision = hazards / max(1, hazards + counts["FP"])
    estimated_missed = missed * scale
    recall = found_functions / max(1.0, found_functions + estimated_missed)
    print(f"packages: {len(PACKAGES)}, files: {result.files}, Functions analysed: {result.functions}")
    print(f"DB100/DB101 findings: {sum(counts.values())} (S {counts['S']}, P {counts['P']}, FP {counts['FP']}, "
          f"unjudged {counts['unjudged']}); precision (S+P)/(S+P+FP) {precision:.1%}")
    for key in silent:
        if sampled.get(key, {}).get("verdict") == "hazard":
            print("MISSED", *key, "-", sampled[key]["reason"][:160])
    print(f"Functions with a finding: {found_functions}; silent: {len(silent)}, of which {sample_size} "
          f"sampled and read: {missed} missed hazard(s) -> about {estimated_missed:.1f} missed in all; "
          f"sampled recall {recall:.1%}")
    if args.confirm:
        confirm(roots, args.cache / "scratch")
    if args.sample_new:
        unjudged = [key for key in silent if key not in sampled]
        for key in random.Random(12).sample(unjudged, min(args.sample_new, len(unjudged))):
            print("SAMPLE", *key)
    return 0


if __name__ == "__main__":
    sys.exit(main())
