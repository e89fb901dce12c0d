"""C++ emitter: formula library -> libtorch autograd nodes in ``out_cpp/`` (DESIGN section 5).

Modules, in dependency order: ``types`` (formula types and their C++
spellings), ``operators`` (binding ``at.X(...)`` calls to declared schemas),
``expressions`` and ``statements`` (pure transliteration of libcst nodes),
``nodes`` (one formula -> node struct, backward function, ``apply()``, forward
wrapper), ``emit`` (library -> files), ``runtime`` (fixed support header),
``generate`` (the ``transpile`` command).

Diagnostics (``path:line:col: CODE message``; nothing is written when any occurs):

=====  ===================================================================
DB200  cannot transliterate <construct> to C++ (outside formulas/README.md)
DB201  call to an unknown operator or function (declare it in the library)
DB202  no declared overload of ``at.X`` accepts the call's arguments
DB203  a name that is neither an input, a local nor a captured value
DB204  one variable (or conditional, or helper argument) with conflicting types
DB205  a schema or annotation type with no C++ spelling
DB206  a second formula for the same operator
=====  ===================================================================
"""
