"""``python -m transpiler``: the ``transpile`` command (:func:`transpiler.cli.run`)."""
from transpiler.cli import run

run()
