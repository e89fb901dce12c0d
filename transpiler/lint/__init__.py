"""``transpile lint``: static checks of backward formulas and ``torch.autograd.Function``.

- :mod:`transpiler.lint.closure_rules`: DB100-DB107 on formula files (closures);
- :mod:`transpiler.lint.rules`: one module per closure rule;
- :mod:`transpiler.lint.fix`: the ``--fix`` rewrite (recompute intermediates in the backward);
- :mod:`transpiler.lint.runner`: the driver, one run put together from
  :mod:`~transpiler.lint.discovery` (which files), :mod:`~transpiler.lint.file_check` (the per-file
  pass: syntax, ctx rules), :mod:`~transpiler.lint.bytecode` (trusting CPython's bytecode),
  :mod:`~transpiler.lint.workers` (the process pool and the cache's per-file entries),
  :mod:`~transpiler.lint.formula_files` (the closure rules of formula files), :mod:`~transpiler.lint.noqa`,
  :mod:`~transpiler.lint.fix_writer` (writing fixes) and :mod:`~transpiler.lint.cache`;
- :mod:`transpiler.lint.settings`: ``[tool.transpile.lint]``, excludes, ``.gitignore``;
- :mod:`transpiler.lint.output`: text, JSON, SARIF and GitHub output; :mod:`transpiler.lint.cli` the command;
- :mod:`transpiler.lint.flake8_plugin`: the same checks as a flake8 plugin;
- :mod:`transpiler.lint.ctx`: the ctx-style rules for ``torch.autograd.Function``.

Codes and their documentation: :mod:`transpiler.codes`.
"""
