"""Our graph passes and quantizer configuration, added to LowerOptions by `configure`.

One pass per file, each file's docstring says what it matches and what it emits:
- graph.py: what the passes share (helpers, op sets, the pass skeletons); not a pass.
- lut_fusion.py (+ lut_backends.py, lut_ethos_u.py): pointwise chains -> one lookup table.
- relu6_to_hardtanh.py: F.relu6 -> hardtanh(0, 6) so quantizers fuse it as activation bounds.
- channels_last_everywhere.py: a channels-last copy after any op whose 4-D output is not (Cortex-M).
- conv1d_as_conv2d.py: Conv1d (+ BatchNorm1d) and 1-D pools as 2-D ops over [N, C, 1, L] (every flow).
- adaptive_pool_as_pool.py: adaptive avg/max pools whose output divides the input -> plain pools (Cortex-M).
- mean_as_pool.py: means over trailing dims -> one-row average pools with their own output qparams (Cortex-M).
- sum_as_mean.py: sums over any dims -> mean * count before quantization (Cortex-M).
- rnn_state_constants.py: an LSTM/GRU initial state computed from constants alone -> a constant (Cortex-M).
- glu_as_sigmoid_mul.py: GLU -> first half * sigmoid(second half) before quantization (Cortex-M).
- clamp_tensor_as_min_max.py: clamp with tensor bounds -> maximum then minimum before quantization (Cortex-M).
- broadcast_operands_expanded.py: the broadcast operand of an add/sub/mul -> expanded to the output's shape
  (Cortex-M).
- norms_as_layer_norm.py: InstanceNorm2d, GroupNorm -> layer norm + per-channel scale/shift before quantization (Cortex-M).
- operands_in_out_order.py: an add/mul operand in another dim order than the output copied to its order (Cortex-M program).
- embedding_as_int8_gather.py: embedding -> quantize becomes a gather of the table's int8 codes (Cortex-M).
- argmax_on_codes.py: argmax/argmin of a dequantized tensor read its int8 codes (Cortex-M).
- constant_linear_weights.py: Linear weights computed from parameters (cross-attention's in_proj_weight slices) ->
  parameters of their own (Cortex-M; ExecuTorch's lowering takes only parameters).
- sdpa_as_matmuls.py: scaled_dot_product_attention -> matmuls and a softmax, a constant mask applied by leaving
  the masked keys out (Cortex-M).
- fold_linear_batchnorm.py: Linear + BatchNorm1d -> one Linear (Cortex-M; prepare_pt2e folds only convs).
- batch_norm_as_depthwise.py: a BatchNorm after no convolution -> a 1x1 depthwise convolution (Cortex-M).
- linear_to_conv.py: Linear -> 1x1 conv on Cortex-M, so weights get per-output-channel scales.
- avgpool_for_npu.py: avg pools with stride > 3 -> mean / cascade of small pools on Ethos-U.
- npu_pool_as_depthwise.py: whole-map average pools (global, squeeze-excite) -> depthwise convs with
  weights 1/(H*W) on Ethos-U, so the mean gets its own output qparams (the Arm quantizer shares the input's).
- cancel_transposes.py: cortex_m::transpose pairs that undo each other (q @ k^T) removed.
- fold_input_offset.py: Cortex-M convolutions without padding get input_offset * sum(w) folded into
  their bias at compile time (offset 0), so the kernels skip that per-call pass over the weights.
- contiguous_view_base.py: a contiguous copy before a view_copy of a non-contiguous (channels-last)
  tensor, which ExecuTorch would otherwise alias with contiguous strides.
- drop_layout_round_trips.py: layout copies that undo each other (NCHW -> NHWC -> NCHW) or copy to the order a
  tensor already has, removed (Cortex-M).
- kernel_scratch.py: conv/depthwise/avg-pool scratch tensors sized for our kernels; kernel variants
  reported.
- activation_alone.py (quantizer annotation): conv/linear/add + activation feeding a concat, and
  every hardsigmoid on Cortex-M, quantized on their own, not folded into the producer.
- upsample_shared_qparams.py (quantizer config): nearest upsampling shares its input's qparams on
  Cortex-M, so it runs on int8 codes.
- int8_layer_norm.py: dequantize -> layer_norm (any trailing dims) -> quantize -> emlkit::quantized_layer_norm (integer
  arithmetic; emlkit/emlkit_ops.py).
- int8_upsample.py: integer nearest upsampling -> emlkit::upsample_nearest2d, any other nearest
  resize -> emlkit::upsample_nearest2d_index with torch's own row/column tables (emlkit/emlkit_ops.py).
- symmetric_weight_range.py (quantizer annotation): int8 weights over [-127, 127] like the Arm
  quantizer, not [-128, 127] which clips each channel's largest weight (Cortex-M).
- int8_matmul_on_u55.py (quantizer config): bmm/mm in int8 on a16w8 U55/U65 targets, which
  delegate matmuls only with int8 inputs.
- fc_rows_as_pixels.py: Linear over M > 1 rows -> 1x1 conv over M pixels on int16 Ethos-U targets
  (Vela 5.1.0 miscompiles int16 FC stacks at batch > 1).
- explicit_npu_clamp.py: conv/linear + ReLU/ReLU6 whose zero point is not int8's minimum (a concat
  branch) gets a quantize/dequantize before the activation on Ethos-U, so it stays an int8 CLAMP
  (ExecuTorch's fold would drop its lower bound).
- npu_pool_zero_point.py: average pools keep their real zero points in the TOSA graph on Ethos-U
  (ExecuTorch's constant folding quantized them: 3 -> 127, and every rounding tie went one way).
- npu_a16w8_conv_rescale.py: on int16 Ethos-U targets an int16 convolution's int32 consumers (add, mul)
  read its int16 output, not its accumulator (Vela 5.1.0 refuses int32 convolution outputs on the U55).
- split_fused_projection.py: a fused q/k/v Linear read part by part (reshape, permute, select) -> one
  Linear per part on Ethos-U55/U65 (Vela 5.1.0 loses a sliced MATMUL operand's offset there).
- roll_as_slices.py: roll -> slices joined by a cat per rolled dim (Cortex-M).
- split_as_slices.py: split/chunk -> one slice per read piece on Cortex-M (no kernel returns a tensor list).
- split_batched_matmul.py: matmul/bmm of two feature maps with batch > 1 -> one batch-1 matmul per
  entry, concatenated, on Ethos-U85 (Vela 5.1.0 reads every head's A at head 0's address).
- own_output_qparams.py (quantizer annotation): softmax, log_softmax and whole-window average pools that feed the final
  classifier observe their own output qparams on Cortex-M (ExecuTorch fixes softmax at 1/256 and pools at
  their input's).
- npu_softmax_ranges.py (quantizer annotation): the sum inside ExecuTorch's NPU softmax decomposition
  gets its exact range [0, N] on int8 Ethos-U targets (observed, it saturated on unseen inputs).
- npu_hardswish_floor.py (quantizer annotation): a tensor that only feeds hardswish is observed from -3
  up on Ethos-U, as ExecuTorch's Cortex-M flow clamps it (hardswish is 0 below -3).
- emlkit_softmax.py: dq -> softmax -> q -> emlkit::softmax (integer, free output scale) on Cortex-M.
- emlkit_log_softmax.py: dq -> log_softmax -> q -> emlkit::log_softmax (exp table, integer log2, free output scale)
  on Cortex-M.
- emlkit_avg_pool.py: dq -> average pool / mean -> q -> emlkit::quantized_avg_pool2d (integer sum,
  requantized to the pool's own output qparams) on Cortex-M.
- int8_io.py: with --io int8 each float input as the int8 codes its leading quantize made (and with int8-all
  each output as the codes its trailing dequantize read), qparams reported (Cortex-M program).
- verify_program.py: last pass, rejects broken programs and (by default) float islands.

Each pass class derives from manager.Pass and declares (`@declare`) its `stage`, the `ops` it rewrites,
its `order`, `runs_after` and `runs_before`, and where it applies: `flows`, compile `targets`, activation
`bits` and LowerOptions `options`. No pass decides for itself whether it runs: `configure` builds every
pass emlkit/passes/manager.py discovers in this package's modules (given a target, only those whose
declaration covers it), the manager orders them and refuses undeclared passes, unknown names,
constraints against the stage order, repeated orders and cycles (tests/passes/test_manager.py checks the
order), and `Pass.__call__` runs a pass's body only where its declaration applies. What passes share
(graph helpers, the op sets several passes match, the skeletons of each stage) is in graph.py; no pass
imports another pass's helpers. tests/passes/ has a test file per pass module (test_<module>.py).
"""

from __future__ import annotations

from typing import Any

from emlkit.lower import LowerOptions


def configure(opts: LowerOptions, allow_float: bool = False, target: Any = None) -> None:
    """Add the passes of this package to `opts` (called by the CLI for every compile): given a target, only
    those whose declaration covers it (emlkit/passes/manager.py), else every pass (the flow then binds them
    to the compile's target, and those that do not apply leave their input as it is)."""
    from emlkit.passes.manager import discover, install

    install(opts, [cls.create(opts, allow_float) for cls in discover()], target)
