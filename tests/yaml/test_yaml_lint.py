"""The imported corpus under the closure rules (DB100-DB107).

It lints clean except for DB105 findings that are real: backward formulas in
derivatives.yaml call ATen operators that have no entry in derivatives.yaml
itself (factories, boolean ops, nested-tensor accessors, the ATen ``*_backward``
operators that formulas call as compute methods or bare names, which the main
dialect spells ``at.<op>``, method-only operators such as ``contiguous``, ``to``
and ``mT``, also ``at.<op>`` there; ``at::sum_to``, a C++ utility, is the ``sum_to``
helper), so within
that library double backward through those calls is not declared. Its 243 written jvps (``result:`` formulas) pass the same
capture rules; a few call such operators too.
"""
from __future__ import annotations

import re
from pathlib import Path

from transpiler.frontend import parse_module
from transpiler.lint.closure_rules import check_formula_module

REAL_DB105 = {
    'at._convolution_double_backward', 'at._ctc_loss_backward',
    'at._cudnn_attention_backward', 'at._efficient_attention_backward',
    'at._embedding_bag_per_sample_weights_backward', 'at._fake_quantize_learnable_per_channel_affine_backward',
    'at._fake_quantize_learnable_per_tensor_affine_backward', 'at._flash_attention_backward',
    'at._fused_rms_norm_backward', 'at._masked_softmax_backward', 'at._nested_tensor_size',
    'at._nested_tensor_storage_offsets', 'at._nested_tensor_strides', 'at.contiguous', 'at.mH', 'at.mT',
    'at.new_full', 'at.new_zeros', 'at.reshape_as', 'at.to_dense', 'at._nested_get_jagged_dummy',
    'at._nested_get_lengths', 'at._nested_get_max_seqlen', 'at._nested_get_min_seqlen',
    'at._nested_get_offsets', 'at._nested_get_ragged_idx', 'at._nested_select_backward',
    'at._nested_sum_backward', 'at._pack_padded_sequence_backward',
    'at._scaled_dot_product_cudnn_attention_backward', 'at._scaled_dot_product_efficient_attention_backward',
    'at._scaled_dot_product_flash_attention_backward',
    'at._scaled_dot_product_flash_attention_for_cpu_backward',
    'at._scaled_dot_product_fused_attention_overrideable_backward', 'at._segment_reduce_backward',
    'at._sparse_log_softmax_backward_data', 'at._sparse_mm_reduce_impl_backward',
    'at._sparse_softmax_backward_data', 'at._sparse_sum_backward', 'at._thnn_differentiable_gru_cell_backward',
    'at._thnn_differentiable_lstm_cell_backward', 'at._thnn_fused_gru_cell_backward',
    'at._thnn_fused_lstm_cell_backward', 'at._weight_norm_differentiable_backward',
    'at._weight_norm_interface_backward', 'at.affine_grid_generator_backward', 'at.conj', 'at.conj_physical',
    'at.conv_tbc_backward', 'at.cudnn_affine_grid_generator_backward', 'at.cummaxmin_backward',
    'at.cumprod_backward', 'at.embedding_backward', 'at.expand_as',
    'at.fake_quantize_per_channel_affine_cachemask_backward',
    'at.fake_quantize_per_tensor_affine_cachemask_backward', 'at.gather_backward', 'at.ger',
    'at.hardsigmoid_backward', 'at.imag', 'at.index_select_backward', 'at.isfinite', 'at.logical_and',
    'at.logical_not', 'at.logical_or',
    'at.logit_backward', 'at.masked_select_backward', 'at.matmul_backward', 'at.mish_backward',
    'at.mkldnn_adaptive_avg_pool2d_backward', 'at.mkldnn_linear_backward', 'at.mkldnn_max_pool2d_backward',
    'at.mkldnn_max_pool3d_backward', 'at.mps_convolution_transpose_backward', 'at.multi_margin_loss_backward',
    'at.multilabel_margin_loss_backward', 'at.narrow', 'at.native_group_norm_backward', 'at.nll_loss',
    'at.nll_loss2d', 'at.ones_like', 'at.real', 'at.reshape', 'at.resolve_conj',
    'at.silu_backward', 'at.square', 'at.to_dense_backward', 'at.to_mkldnn_backward',
    'at.trace_backward', 'at.value_selecting_reduction_backward', 'at.zeros_like',
}
REAL_JVP_DB105 = {
    'at.conj', 'at.conj_physical', 'at.expand_as', 'at.flatten',
    'at.glu_backward_jvp', 'at.glu_jvp', 'at.logical_and', 'at.logical_or', 'at.narrow', 'at.new_full',
    'at.new_ones', 'at.new_zeros', 'at.outer', 'at.real', 'at.to', 'at.zeros_like',
}


def test_imported_corpus_lints_clean_but_for_real_findings(imported_dir: Path):
    sources = {path: path.read_text(encoding="utf-8") for path in sorted(imported_dir.glob("derivatives_*.py"))}
    modules = {path: parse_module(str(path), text) for path, text in sources.items()}
    assert sum(len(m.formulas) for m in modules.values()) == 701      # 687 entries, 14 with dispatch sections
    known = frozenset(name for m in modules.values() for f in m.formulas
                      for name in (str(f.schema.name), f.schema.name.base))
    findings = [d for path, m in modules.items() for d in check_formula_module(m, sources[path], known)]
    assert {d.code for d in findings} == {"DB105"}, [d.format() for d in findings if d.code != "DB105"]
    called = {re.search(r"^(backward|jvp) calls (.+?), which", d.message).group(1, 2) for d in findings}
    assert {name for closure, name in called if closure == "backward"} == REAL_DB105
    assert {name for closure, name in called if closure == "jvp"} == REAL_JVP_DB105
    assert sum(f.jvp is not None for m in modules.values() for f in m.formulas) == 243
