"""``transpile lint``: static checks of backward formulas and ``torch.autograd.Function``.

- :mod:`transpiler.lint.closure_rules`: DB100-DB107 on formula files (closures);
- :mod:`transpiler.lint.rules`: one module per closure rule;
- :mod:`transpiler.lint.fix`: the ``--fix`` rewrite (recompute intermediates in the backward);
- the driver (paths, ``# noqa``, output formats) and the ctx-style rules live beside them.
"""
