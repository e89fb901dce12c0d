"""Proving a formula package: ``transpile prove`` and ``formulas.testing.check_formula``.

``cases`` makes inputs from a schema, ``torch_run`` runs a formula's Python on torch
tensors, ``tiers`` runs each proof tier on one case, ``terms`` points a wrong gradient at
the term of the backward that explains it, ``check`` is ``check_formula`` and ``cli`` the
command. Nothing here imports torch until a check runs.
"""
