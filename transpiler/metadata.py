"""The one table of tensor metadata: methods and attributes whose value is never a tensor.

Every consumer reads it: the dataflow (a value read through one of these is
METADATA, safe to capture), the lint fix for DB100 (``t_sizes = t.sizes()``),
the C++ emitter (the methods it writes, with their C++ type and expression),
the derivatives.yaml importer (``sym_*`` methods spelled as their plain ones)
and, through the front-end's captures, the reference engine's capture plan.
Adding ``stride()`` to the emitter is one edit here.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class MetadataMethod:
    """One tensor method returning metadata.

    ``cpp_type``: the C++ emitter's type of its value (a name in ``transpiler.cpp.types``)
    and ``cpp``: its C++ expression (``{0}`` the receiver, ``{1}``... the arguments), both
    None when the emitter does not write it; ``plain``: for a ``sym_*`` method, the method
    the formulas spell instead (derivatives.yaml's ``self.sym_sizes()`` is ``self.sizes()``).
    """

    cpp_type: str | None = None
    cpp: str | None = None
    plain: str | None = None


METADATA_METHODS: dict[str, MetadataMethod] = {
    "sizes": MetadataMethod("INT_LIST", "{0}.sizes().vec()"),
    "size": MetadataMethod("INT", "{0}.size({1})"),
    "dim": MetadataMethod("INT", "{0}.dim()"),
    "numel": MetadataMethod("INT", "{0}.numel()"),
    "scalar_type": MetadataMethod("SCALAR_TYPE", "{0}.scalar_type()"),
    "options": MetadataMethod("OPTIONS", "{0}.options()"),
    "ndimension": MetadataMethod(),
    "strides": MetadataMethod(),
    "stride": MetadataMethod(),
    "storage_offset": MetadataMethod(),
    "sym_sizes": MetadataMethod(plain="sizes"),
    "sym_size": MetadataMethod(plain="size"),
    "sym_numel": MetadataMethod(plain="numel"),
    "sym_strides": MetadataMethod(plain="strides"),
    "sym_stride": MetadataMethod(plain="stride"),
    "sym_storage_offset": MetadataMethod(plain="storage_offset"),
    "get_device": MetadataMethod(),
    "is_contiguous": MetadataMethod("BOOL", "{0}.is_contiguous()"),
    "is_floating_point": MetadataMethod("BOOL", "{0}.is_floating_point()"),
    "is_complex": MetadataMethod("BOOL", "{0}.is_complex()"),
    "element_size": MetadataMethod(),
    "layout": MetadataMethod(),
    "device": MetadataMethod(),
    "requires_grad": MetadataMethod(),
    "defined": MetadataMethod(),
}

#: Tensor attributes holding metadata (``t.dtype``, ``t.shape``...).
METADATA_ATTRIBUTES = frozenset({
    "dtype", "shape", "device", "ndim", "layout", "is_cuda", "is_sparse", "is_quantized",
    "is_meta", "requires_grad",
})

#: ``sym_*`` method -> the plain method written in its place.
PLAIN_METADATA = {name: method.plain for name, method in METADATA_METHODS.items() if method.plain}
