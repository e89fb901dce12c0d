"""The corpus proof isolates entries: an operator that crashes the process (torch 2.13's own
``_batch_norm_no_update`` without running stats segfaults) fails that entry alone."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
sys.path.insert(0, str(Path(__file__).parent))      # corpus_proof imports corpus_inputs as a script does
import corpus_proof  # noqa: E402


def _prove(op: str) -> dict:
    if op == "crashes":
        x = torch.randn(2, 3, dtype=torch.float64)
        torch.ops.aten._batch_norm_no_update(x, None, None, None, None, 0.5, 0.5)   # SIGSEGV in torch 2.13
    if op == "raises":
        raise ValueError("a broken case\nsecond line")
    return {"status": "proven", "samples": 1, "source": "ours", "reason": op}


def test_a_crash_or_an_error_is_the_failure_of_its_entry_only(monkeypatch):
    monkeypatch.setattr(corpus_proof, "CHUNK", 3)
    ops = ["a", "b", "crashes", "c", "raises", "d", "e"]
    results = corpus_proof.prove_isolated(ops, _prove)
    assert list(results) == ops
    for op in ("a", "b", "c", "d", "e"):          # before and after the crash, in its chunk and later ones
        assert results[op] == {"status": "proven", "samples": 1, "source": "ours", "reason": op}
    assert results["crashes"]["status"] == "failed"
    assert results["crashes"]["reason"] == "C1: the process proving it died (signal 11, SIGSEGV)"
    assert results["raises"] == {"status": "failed", "samples": 0, "source": "",
                                 "reason": "C1: the proof raised ValueError: a broken case"}


def test_workers_split_the_entries_and_keep_their_order(monkeypatch):
    monkeypatch.setattr(corpus_proof, "CHUNK", 2)
    ops = ["a", "crashes", "b", "c", "raises", "d"]
    results = corpus_proof.prove_in_parallel(ops, _prove, 2)
    assert list(results) == ops
    assert [results[op]["status"] for op in ops] == ["proven", "failed", "proven", "proven", "failed", "proven"]
    assert results["crashes"]["reason"] == "C1: the process proving it died (signal 11, SIGSEGV)"
