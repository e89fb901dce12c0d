"""The formulas inside torch, in process, no build (DESIGN section 6b).

* :func:`override` / :func:`install` / :func:`uninstall`: a package's formulas
  stand in for aten operators' own autograd (``torch.sin``'s backward runs the
  ``sin`` formula) until uninstalled;
* :func:`custom_ops`: every formula of a package becomes ``torch.ops.<namespace>.<op>``
  through ``torch.library.custom_op`` and ``register_autograd``;
* :class:`TorchBackend` (``at.<op>`` on torch tensors) and :class:`TorchFormula`
  (one formula run by torch's autograd), for other tools that run formulas with torch.

``import formulas`` never imports this package; importing it needs torch.
"""
from __future__ import annotations

try:
    import torch  # noqa: F401
except ImportError:     # pragma: no cover - exercised only without torch
    raise ImportError("formulas.torch needs torch: pip install torch==2.13.0 (or the [torch] extra)") from None

from formulas.torch.custom_ops import CustomOps, NoShapeRule, custom_ops
from formulas.torch.backend import OracleTensor, TorchBackend, load_package, unwrap, wrap
from formulas.torch.function import CapturedIntermediate, NoForwardAD, TorchFormula
from formulas.torch.override import (Installation, OverrideError, in_place_twins, install, overridable, override,
                                     uninstall)

__all__ = [
    "CapturedIntermediate", "CustomOps", "Installation", "NoShapeRule", "NoForwardAD", "OracleTensor", "OverrideError", "TorchBackend",
    "TorchFormula", "custom_ops", "in_place_twins", "install", "load_package", "overridable", "override", "uninstall", "unwrap", "wrap",
]
