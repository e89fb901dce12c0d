"""Per-formula mode's bookkeeping: which formula or helper a diagnostic belongs to, and what is left out.

``transpile --keep-going`` (for a corpus such as an imported derivatives.yaml)
emits every formula that lints and transliterates and leaves out each one
that does not. Owns the entries of a library (its formulas and helpers keyed
by where they start), a :class:`Refusal` (an entry left out and why), the
callers of a refused helper, and the library less what is left out. The loop
that emits until nothing more is refused is :func:`transpiler.pipeline.run`'s.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING

from transpiler.diagnostics import Diagnostic

if TYPE_CHECKING:   # imported lazily: an up-to-date run (which reads ``REFUSED``) never loads libcst
    from transpiler.model import Formula, FormulaModule, Helper, Library, Span

REFUSED = "REFUSED"            # per-formula mode: one refused entry a line, ``path:line:col: CODE message [entry]``
MODULE_LEVEL = "<module>"      # a finding outside every formula and helper


@dataclass(frozen=True, order=True)
class Refusal:
    """A formula (``entry``: its operator; a helper's name or ``<module>`` outside formulas) left out
    by per-formula mode, with the diagnostic that refused it."""

    diagnostic: Diagnostic
    entry: str
    part: str = ""      # "jvp": only the formula's jvp was left out

    def format(self) -> str:
        """The refusal as a line: the diagnostic, then the entry (and part) it leaves out."""
        return f"{self.diagnostic.format()} [{' '.join(filter(None, (self.entry, self.part)))}]"



def _first_read(module: FormulaModule, item: Formula | Helper, name: str) -> Span:
    """Where ``item`` (a formula or a helper of ``module``) first reads the module-level ``name``:
    in its ``def``, else in its synthesised jvp, whose rule its decorator declares."""
    from transpiler.dataflow import global_reads

    for read in global_reads(item.node):
        if read.value == name:
            return module.span(read)
    return item.jvp.span


def summary_line(emitted: int, total: int) -> str:
    """The last line of per-formula mode's report."""
    return f"{emitted} of {total} formulas emitted"



class Entries:
    """The formulas and helpers of a library as entries keyed by (path, first line, decorators
    included), to attribute diagnostics to them and leave refused ones out."""

    def __init__(self, library: Library) -> None:
        from transpiler.model_summary import entry_lines, helper_first_line

        self.library = library
        self.starts: dict[str, list[tuple[int, str]]] = {}
        self.formula_keys: set[tuple[str, int]] = set()
        self.helper_keys: dict[str, tuple[str, int]] = {}
        self.jvp_lines: dict[tuple[str, int], range] = {}   # a formula's written jvp: its lines
        for module in library.modules:
            found = []
            for formula in module.formulas:
                lines = entry_lines(module, formula)     # a summary's formula carries them (no syntax read)
                found.append((lines.first, formula.op_name))
                self.formula_keys.add((module.path, lines.first))
                if lines.jvp is not None:
                    self.jvp_lines[module.path, lines.first] = lines.jvp
            for helper in module.helpers:
                found.append((helper_first_line(module, helper), helper.name))
                self.helper_keys[helper.name] = (module.path, found[-1][0])
            self.starts[module.path] = sorted(found)

    def key(self, module: FormulaModule, item: Formula | Helper) -> tuple[str, int]:
        """The (path, first line) that keys ``item``, a formula or a helper of ``module``."""
        from transpiler.model import Helper
        from transpiler.model_summary import entry_lines, helper_first_line

        if isinstance(item, Helper):
            return module.path, helper_first_line(module, item)
        return module.path, entry_lines(module, item).first

    def owner(self, diagnostic: Diagnostic) -> tuple[tuple[str, int], str]:
        """The entry whose definition holds the diagnostic's line (the last one starting above it)."""
        owner = ((diagnostic.path, 0), MODULE_LEVEL)
        for line, name in self.starts.get(diagnostic.path, ()):
            if line > diagnostic.line:
                break
            owner = ((diagnostic.path, line), name)
        return owner

    def in_jvp(self, key: tuple[str, int], diagnostic: Diagnostic) -> bool:
        """Whether the diagnostic lies inside the written jvp of the formula ``key``."""
        return diagnostic.line in self.jvp_lines.get(key, ())

    def callers_of_refused(self, refused: dict[tuple[str, int], Refusal]) -> dict[tuple[str, int], Refusal]:
        """Formulas and helpers that name a refused helper (their ``references``): their C++ would not link."""
        names = {name for name, key in self.helper_keys.items() if key in refused}
        added: dict[tuple[str, int], Refusal] = {}
        while names:
            new = set()
            for module in self.library.modules:
                for item, label in [*((f, f.op_name) for f in module.formulas),
                                    *((h, h.name) for h in module.helpers)]:
                    key = self.key(module, item)
                    called = item.references & names
                    if key in refused or key in added or not called:
                        continue
                    helper = sorted(called)[0]
                    cause = refused.get(self.helper_keys[helper]) or added[self.helper_keys[helper]]
                    where = _first_read(module, item, helper)
                    added[key] = Refusal(Diagnostic(module.path, where.line, where.col, cause.diagnostic.code,
                                                    f"calls helper '{helper}', which was left out"), label)
                    if label in self.helper_keys:
                        new.add(label)
            names = new
        return added

    def without(self, refused: set[tuple[str, int]], jvp_left_out: dict[tuple[str, int], Refusal]) -> Library:
        """The library less the refused formulas and helpers, and less the jvps left out."""
        from transpiler.model import Library
        from transpiler.model_summary import with_changes

        def kept(module: FormulaModule, formula: Formula) -> Formula:
            why = jvp_left_out.get(self.key(module, formula))
            if why is None:
                return formula
            return with_changes(formula, jvp=None, jvp_left_out=f"{why.diagnostic.code} {why.diagnostic.message}")

        return Library(tuple(dataclasses.replace(
            module,
            formulas=tuple(kept(module, f) for f in module.formulas if self.key(module, f) not in refused),
            helpers=tuple(h for h in module.helpers if self.key(module, h) not in refused))
            for module in self.library.modules))


