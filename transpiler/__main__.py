"""``python -m transpiler``: the command line (:func:`transpiler.cli.main`), left without tearing
the interpreter down.

A run holds the models of every formula file it read, hundreds of thousands of objects; freeing
them one by one at exit was about a fifth of the CPU time of ``transpile`` after one formula file
was edited (measured on the imported derivatives.yaml corpus). When the command has returned there
is nothing left to do but flush what it printed, so the process leaves at once (as mypy does). A
command that raises, or that loaded torch (whose exit handlers should run), leaves the usual way.
"""
import os
import sys

from transpiler.cli import main

status = main() or 0
if "torch" in sys.modules:
    sys.exit(status)
try:
    sys.stdout.flush()
    sys.stderr.flush()
except OSError:         # the reader has gone: the interpreter's own exit says so with 120
    status = status or 120
os._exit(status)
