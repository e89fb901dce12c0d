"""``transpile lint``: static checks of backward formulas and ``torch.autograd.Function``.

- :mod:`transpiler.lint.closure_rules`: DB100-DB107 on formula files (closures);
- :mod:`transpiler.lint.rules`: one module per closure rule;
- :mod:`transpiler.lint.fix`: the ``--fix`` rewrite (recompute intermediates in the backward);
- :mod:`transpiler.lint.runner`: the driver (files, syntax check, ``# noqa``, workers);
- :mod:`transpiler.lint.settings`: ``[tool.transpile.lint]``, excludes, ``.gitignore``;
- :mod:`transpiler.lint.output`: text, JSON, SARIF and GitHub output; :mod:`transpiler.lint.cli` the command;
- :mod:`transpiler.lint.flake8_plugin`: the same checks as a flake8 plugin;
- :mod:`transpiler.lint.ctx`: the ctx-style rules for ``torch.autograd.Function``.

Codes and their documentation: :mod:`transpiler.codes`.
"""
