"""Test-suite wiring: the proof-tier report (DESIGN section 7).

A test proves one tier for one op when it is marked ``@pytest.mark.tier("R1")``
and parametrized with ``case`` (an ``OpCase``) or ``op`` (the op's name). The
plugin gathers the outcomes, prints the op x tier table at the end of the run
(with a line counting the ops and cases proven on torch's OpInfo samples) and,
with ``--tier-report FILE``, writes them as JSON for ``transpile coverage``.

It also orders the test files for xdist (``--dist loadfile --no-loadscope-reorder``):
the files that wait minutes on a build first, one per worker, then the others by their
number of tests, largest first, so that no worker is left alone with a long file at the end.

The session keeps its build cache (``$TRANSPILE_BUILD_DIR``: the parse cache, lint's) in this
checkout's own (its ``[tool.transpile] build-dir``) unless one is set: a ``transpile`` run in a
test's temporary project would otherwise use the per-user one (``~/.cache``), which every
checkout shares, so that one at other transpiler sources evicts the entries this one relies on.
"""
from __future__ import annotations

import json
import os
from collections import Counter
from pathlib import Path

import pytest

from transpiler.project import CACHE_ENV, find_project
from transpiler.tier_table import TIERS, TierTable

REPO = Path(__file__).resolve().parents[1]

_table_key = pytest.StashKey[TierTable]()


class _TierRecorder:
    """Records the labelled reports in the run's table: in the one process, or in xdist's
    controller, which receives every worker's reports."""

    def __init__(self, table: TierTable) -> None:
        self.table = table

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        label = getattr(report, "proof_tier", None)
        if label is not None:
            op, tier, opinfo_case = label
            self.table.record(op, tier, report.outcome, opinfo_case)


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--tier-report", metavar="FILE", default=None,
                     help="write per-op proof-tier outcomes as JSON to FILE")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", f"tier(name): the proof tier a test establishes, one of {', '.join(TIERS)}")
    config.stash[_table_key] = TierTable()
    config.pluginmanager.register(_TierRecorder(config.stash[_table_key]), "proof-tier-recorder")


@pytest.fixture(autouse=True, scope="session")
def _this_checkouts_build_cache():
    """``$TRANSPILE_BUILD_DIR`` as this checkout's build cache for the session, unless it is set."""
    with pytest.MonkeyPatch.context() as patch:
        if not os.environ.get(CACHE_ENV):
            patch.setenv(CACHE_ENV, str(find_project(REPO).build_dir))
        yield


#: Files whose first test waits minutes on a build (the corpus funnel's, out_cpp's, the README
#: tour's virtual environment): started first, so that they end long before the suite does.
BUILD_BOUND_FILES = (
    "tests/yaml/test_yaml_corpus_compiled.py",
    "tests/cpp/test_compiled_ops.py",
    "tests/test_installed_tour.py",
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Build-bound files first, then the others by their number of tests (the scheduler's own
    order, which would leave the few-test build-bound files to the end)."""
    def file_of(item: pytest.Item) -> str:
        return item.nodeid.split("::", 1)[0]

    count = Counter(file_of(item) for item in items)
    rank = {path: place for place, path in enumerate(BUILD_BOUND_FILES)}
    items.sort(key=lambda item: (rank.get(file_of(item), len(rank)), -count[file_of(item)]))


def _op_of(item: pytest.Item) -> str | None:
    params = getattr(item, "callspec", None)
    if params is None:
        return None
    case = params.params.get("case")
    if case is not None and hasattr(case, "op"):
        return case.op
    op = params.params.get("op")
    return op if isinstance(op, str) else None


def _opinfo_case_of(item: pytest.Item) -> str | None:
    """The name of the case when the item runs one made from a torch OpInfo sample."""
    case = getattr(item, "callspec", None) and item.callspec.params.get("case")
    return case.name if getattr(case, "opinfo", "") else None


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    """Label the report that settles a tier test with ``[op, tier, OpInfo case]``: an attribute
    of the report travels from an xdist worker to the controller, where it is recorded."""
    outcome = yield
    report = outcome.get_result()
    marker = item.get_closest_marker("tier")
    op = _op_of(item)
    if marker is None or op is None:
        return
    if report.when == "call" or (report.when == "setup" and not report.passed):
        report.proof_tier = [op, marker.args[0], _opinfo_case_of(item)]


def pytest_terminal_summary(terminalreporter, exitstatus, config: pytest.Config) -> None:
    table = config.stash[_table_key]
    if not table.results:
        return
    terminalreporter.section("proof tiers (DESIGN section 7)")
    from formulas import FORMULAS, NONDIFFERENTIABLE
    from formulas.torch import in_place_twins, overridable

    terminalreporter.write_line(table.render(nondifferentiable=frozenset(NONDIFFERENTIABLE) - set(FORMULAS),
                                             not_overridable=frozenset(overridable()[1]),
                                             with_in_place_twin=frozenset(in_place_twins()[0].values())))
    path = config.getoption("--tier-report")
    if path:
        with open(path, "w") as f:
            json.dump(table.as_json(), f, indent=1, sort_keys=True)
