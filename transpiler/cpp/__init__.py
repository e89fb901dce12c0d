"""C++ emitter: formula library -> libtorch autograd nodes in ``out_cpp/`` (DESIGN section 5).

Modules, in dependency order: ``types`` (formula types and their C++
spellings), ``operators`` (binding ``at.X(...)`` calls to declared schemas),
``expressions`` and ``statements`` (pure transliteration of libcst nodes),
``signature`` (the forward wrapper's signature, computed once per formula),
``forward_ad`` (the jvp and the wrapper's forward-mode lines), ``nodes`` (one
formula -> node struct, backward function, ``apply()``, forward wrapper),
``runtime`` (the fixed support headers, real ``.h`` files of this package),
``emit_once`` (each formula emitted once per run), ``emit`` (library ->
files), ``per_formula`` (``--keep-going``: what is left out, and why),
``generate`` (the ``transpile`` command; the run itself is
:mod:`transpiler.pipeline`).
No module here imports :mod:`transpiler.lint`: the pipeline joins the two.

Diagnostics (``path:line:col: CODE message``; nothing is written when any occurs) are
DB200-DB206, declared with every other code in :mod:`transpiler.codes` (``transpile rule DB200``).
"""
