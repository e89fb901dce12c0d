"""The one table of metadata methods (transpiler/metadata.py) and the consumers that read it."""
from __future__ import annotations

import libcst as cst

import reference_engine as engine
from transpiler.cpp.expressions import EMITTED_METADATA
from transpiler.dataflow import ValueKind, analyze_body
from transpiler.metadata import METADATA_METHODS, PLAIN_METADATA


def test_every_method_the_emitter_writes_runs_in_the_engine():
    """A formula that transpiles reads only metadata the reference engine's Tensor has."""
    x = engine.tensor([[1.0, 2.0]])
    for name in EMITTED_METADATA:
        value = getattr(x, name)(0) if name == "size" else getattr(x, name)()
        assert value is not None, name
    assert set(EMITTED_METADATA) == {n for n, m in METADATA_METHODS.items() if m.cpp}


def test_sym_methods_are_spelled_as_plain_metadata_methods():
    assert PLAIN_METADATA["sym_sizes"] == "sizes"
    assert all(plain in METADATA_METHODS and name.startswith("sym_") for name, plain in PLAIN_METADATA.items())


def test_the_dataflow_reads_every_table_method_as_metadata():
    body = cst.parse_module("".join(f"v_{name} = x.{name}()\n" for name in METADATA_METHODS)).body
    flow = analyze_body(body, {"x": ValueKind.TENSOR})
    assert {name: flow.env[f"v_{name}"] for name in METADATA_METHODS} == dict.fromkeys(METADATA_METHODS,
                                                                                   ValueKind.METADATA)
