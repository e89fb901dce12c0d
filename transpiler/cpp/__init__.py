"""C++ emitter: formula library -> libtorch autograd nodes in ``out_cpp/`` (DESIGN section 5).

Modules, in dependency order: ``types`` (formula types and their C++
spellings), ``operators`` (binding ``at.X(...)`` calls to declared schemas),
``expressions`` and ``statements`` (pure transliteration of libcst nodes),
``nodes`` (one formula -> node struct, backward function, ``apply()``, forward
wrapper), ``emit`` (library -> files), ``runtime`` (fixed support header),
``generate`` (the ``transpile`` command).

Diagnostics (``path:line:col: CODE message``; nothing is written when any occurs) are
DB200-DB206, declared with every other code in :mod:`transpiler.codes` (``transpile rule DB200``).
"""
