"""Compile-time verifier and firmware op adapters agree (issue 20): every limit the cortex_m::, emlkit:: and
aten:: adapters' prepare functions check (read from firmware/ops/*.c) and the loader's aliasing check
(firmware/runtime/method.c) are checked by emlkit/adapter_limits.py with the same message text; a lowered
program with an argument the device would refuse is refused at compile time."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import torch

import executorch.backends.cortex_m.passes  # noqa: F401  (registers torch.ops.cortex_m)
import executorch.exir.passes.dim_order_ops_registry  # noqa: F401  (registers torch.ops.dim_order_ops)
import emlkit.emlkit_ops  # noqa: F401  (registers torch.ops.emlkit)
from emlkit import adapter_limits as al
from emlkit.deploy.export import expand_generators
from emlkit.errors import EXIT_UNSUPPORTED, AotError

OPS_DIR = Path(__file__).resolve().parent.parent / "firmware" / "ops"
METHOD_C = OPS_DIR.parent / "runtime" / "method.c"
# The adapters whose range checks go through cortex_m_util.h's cm_int/cm_pair/cm_int_list.
CM_SOURCES = ("cortex_m_*.c", "emlkit_qparams_ops.c")
C_CONSTANTS = {"INT32_MAX": al.INT32_MAX, "INT32_MIN": al.INT32_MIN, "CM_MAX_OFFSET": al.CM_MAX_OFFSET,
               "ET_MAX_DIM": al.ET_MAX_DIM}


def _c_int(expr: str) -> int | None:
    """A C integer constant expression of the adapters (INT32_MAX, -CM_MAX_OFFSET, 1 << 20, ...), else None."""
    e = re.sub(r"\(u?int\d+_t\)", "", expr.strip())    # casts: (int64_t)1 << 30
    for k, v in C_CONSTANTS.items():
        e = re.sub(rf"\b{k}\b", str(v), e)
    if not re.fullmatch(r"[-+ ()0-9<]*", e):
        return None       # a variable (pad_value's range depends on the dtype)
    return int(eval(e))   # noqa: S307  (digits and operators only, checked above)


def _functions(text: str) -> dict[str, str]:
    heads = list(re.finditer(r"^(?:ET_PREPARE\s+)?(?:static\s+)?(?:inline\s+)?et_status\s+(\w+)\(", text, re.M))
    out = {}
    for m in heads:
        end = text.find("\n}\n", m.start())
        out[m.group(1)] = text[m.start():end]
    return out


_INT = re.compile(r'cm_int\(ctx, op, args, [^,]+, "(\w+)", ([^,]+), ([^,]+), &')
_PAIR = re.compile(r'cm_pair\(ctx, op, args, [^,]+, "(\w+)", ([^,]+), ([^,]+), \w+\)')
_LIST = re.compile(r'cm_int_list\(ctx, op, args, [^,]+, "(\w+)", ([^,]+), ([^,]+), ([^,]+), ')


def c_limits() -> list[tuple[str, str, str, int | None, int | None, int]]:
    """(op, kind, arg name, lo, hi, max entries) for every range check of every cortex_m:: prepare function."""
    rows = []
    for path in sorted(p for g in CM_SOURCES for p in OPS_DIR.glob(g)):
        # generating macros (cortex_m_conv.c's CONV_OP) expanded as `export` does
        funcs = _functions(expand_generators(path.read_text()))

        def reach(name: str, seen: set[str]) -> set[str]:
            seen.add(name)
            for other in funcs:
                if other not in seen and re.search(rf"\b{other}\(", funcs[name]):
                    reach(other, seen)
            return seen

        for name, body in funcs.items():
            if not (name.startswith(("op_cortex_m_", "op_emlkit_")) and name.endswith("_prepare")):
                continue
            ops = set(re.findall(r'"((?:cortex_m|emlkit)::\w+)"', body))
            assert len(ops) == 1, f"{path.name}:{name} names {ops}"
            op = ops.pop()
            for f in sorted(reach(name, set())):
                for m in _INT.finditer(funcs[f]):
                    rows.append((op, "int", m.group(1), _c_int(m.group(2)), _c_int(m.group(3)), 1))
                for m in _PAIR.finditer(funcs[f]):
                    rows.append((op, "pair", m.group(1), _c_int(m.group(2)), _c_int(m.group(3)), 2))
                for m in _LIST.finditer(funcs[f]):
                    rows.append((op, "list", m.group(1), _c_int(m.group(3)), _c_int(m.group(4)), int(m.group(2).strip()
                                 .replace("ET_MAX_DIM", str(al.ET_MAX_DIM)))))
    return sorted(set(rows), key=str)


def _cl(*shape: int, dtype: torch.dtype = torch.int8) -> torch.Tensor:
    return torch.zeros(*shape, dtype=dtype).to(memory_format=torch.channels_last)


def _z(*shape: int, dtype: torch.dtype = torch.int8) -> torch.Tensor:
    return torch.zeros(*shape, dtype=dtype)


def _requant(n: int) -> tuple[torch.Tensor, torch.Tensor]:
    return torch.full((n,), 1 << 30, dtype=torch.int32), torch.full((n,), -1, dtype=torch.int32)


def valid(op: str) -> tuple[list[Any], torch.Tensor]:
    """Arguments (schema order) and output the adapter accepts."""
    m8, s8 = _requant(8)
    m4, s4 = _requant(4)
    b8 = _z(8, dtype=torch.int32)
    table: dict[str, tuple[list[Any], torch.Tensor]] = {
        "quantized_conv2d": ([_cl(1, 4, 5, 5), _z(8, 3, 3, 4), b8, [1, 1], [0, 0], [1, 1], 128, -1, m8, s8, -128, 127,
                              _z(64)], _cl(1, 8, 3, 3)),
        "quantized_conv2d_nhwc": ([_z(1, 5, 5, 4), _z(8, 3, 3, 4), b8, [1, 1], [0, 0], [1, 1], 128, -1, m8, s8, -128,
                                   127, _z(64)], _z(1, 3, 3, 8)),
        "quantized_depthwise_conv2d": ([_cl(1, 4, 5, 5), _z(1, 3, 3, 4), None, [1, 1], [0, 0], [1, 1], 1, 128, -1, m4,
                                        s4, -128, 127, _z(64)], _cl(1, 4, 3, 3)),
        "quantized_depthwise_conv2d_nhwc": ([_z(1, 5, 5, 4), _z(1, 3, 3, 4), None, [1, 1], [0, 0], [1, 1], 1, 128, -1,
                                             m4, s4, -128, 127, _z(64)], _z(1, 3, 3, 4)),
        "quantized_transpose_conv2d": ([_cl(1, 4, 3, 3), _z(8, 3, 3, 4), b8, [1, 1], [0, 0], [0, 0], [1, 1], 0, 0, m8,
                                        s8, -128, 127, _z(4), _z(4)], _cl(1, 8, 5, 5)),
        "quantized_transpose_conv2d_nhwc": ([_z(1, 3, 3, 4), _z(8, 3, 3, 4), b8, [1, 1], [0, 0], [0, 0], [1, 1], 0, 0,
                                             m8, s8, -128, 127, _z(4), _z(4)], _z(1, 5, 5, 8)),
        "quantized_add": ([_z(1, 4), 0, 1 << 30, -1, _z(1, 4), 0, 1 << 30, -1, 0, 1 << 30, -1, -128, 127], _z(1, 4)),
        "quantized_mul": ([_z(1, 4), 0, _z(1, 4), 0, 0, 1 << 30, -1], _z(1, 4)),
        "quantized_div": ([_z(1, 4), 0, _z(1, 4), 0, 0, 0.5], _z(1, 4)),
        "quantized_activation": ([_z(1, 4), _z(256)], _z(1, 4)),
        "minimum": ([_z(1, 4), _z(1, 4)], _z(1, 4)),
        "maximum": ([_z(1, 4), _z(1, 4)], _z(1, 4)),
        "quantized_linear": ([_z(2, 16), _z(8, 16), b8, None, 0, 0, 0, [1 << 30], [-1], 127, -128], _z(2, 8)),
        "quantized_batch_matmul": ([_z(1, 2, 16), 0, _z(1, 8, 16), 0, 0, 1 << 30, -1, _z(4)], _z(1, 2, 8)),
        "quantized_avg_pool2d": ([_cl(1, 4, 4, 4), [2, 2], [2, 2], [0, 0], False, 0, 1 << 30, -1, _z(4)],
                                 _cl(1, 4, 2, 2)),
        "quantized_avg_pool2d_nhwc": ([_z(1, 4, 4, 4), [2, 2], [2, 2], [0, 0], False, 0, 1 << 30, -1, _z(4)],
                                      _z(1, 2, 2, 4)),
        "quantized_max_pool2d": ([_cl(1, 4, 4, 4), [2, 2], [2, 2], [0, 0], [1, 1], False, 0, 0, -128, 127],
                                 _cl(1, 4, 2, 2)),
        "quantized_max_pool2d_nhwc": ([_z(1, 4, 4, 4), [2, 2], [2, 2], [0, 0], [1, 1], False, 0, 0, -128, 127],
                                      _z(1, 2, 2, 4)),
        "quantize_per_tensor": ([_z(4, dtype=torch.float32), 0.1, 0, -128, 127, torch.int8], _z(4)),
        "dequantize_per_tensor": ([_z(4), 0.1, 0, -128, 127, torch.int8], _z(4, dtype=torch.float32)),
        "softmax": ([_z(1, 10), -1, 0, -128, 1 << 30, 1, -100], _z(1, 10)),
        "pad": ([_cl(1, 4, 4, 4), [0, 0, 1, 1], [0, 0, 1, 1], 0], _cl(1, 4, 6, 6)),
        "transpose": ([_z(2, 3), [1, 0]], _z(3, 2)),
    }
    f = torch.float32
    exp_table = torch.full((256,), 1 << 10, dtype=torch.int32)
    exp_table[0] = 1 << 22
    others: dict[str, tuple[list[Any], torch.Tensor]] = {
        "emlkit::softmax": ([_z(1, 10), exp_table, -1, 0, 1 << 30, 20], _z(1, 10)),
        "emlkit::quantized_avg_pool2d": ([_cl(1, 4, 4, 4), [2, 2], [2, 2], 0, 0, 1 << 30, 2], _cl(1, 4, 2, 2)),
        "emlkit::upsample_nearest2d": ([_z(1, 4, 2, 2), 2, 2], _z(1, 4, 4, 4)),
        "emlkit::upsample_nearest2d_index": ([_z(1, 4, 2, 3), [0, 0, 1], [0, 1, 1, 2, 2]], _z(1, 4, 3, 5)),
        "emlkit::quantized_layer_norm": ([_z(2, 8), _z(8, dtype=torch.int32), _z(8, dtype=torch.int32), 1, 10, 0],
                                         _z(2, 8)),
        "aten::add.Tensor": ([_z(2, 4, dtype=f), _z(2, 4, dtype=f), 1], _z(2, 4, dtype=f)),
        "aten::sub.Tensor": ([_z(2, 4, dtype=f), _z(2, 4, dtype=f), 1], _z(2, 4, dtype=f)),
        "aten::mul.Tensor": ([_z(2, 4, dtype=f), _z(2, 4, dtype=f)], _z(2, 4, dtype=f)),
        "aten::div.Tensor": ([_z(2, 4, dtype=f), _z(2, 4, dtype=f)], _z(2, 4, dtype=f)),
        "aten::add.Scalar": ([_z(2, 4, dtype=f), 0.5, 1], _z(2, 4, dtype=f)),
        "aten::sub.Scalar": ([_z(2, 4, dtype=f), 0.5, 1], _z(2, 4, dtype=f)),
        "aten::mul.Scalar": ([_z(2, 4, dtype=f), 0.5], _z(2, 4, dtype=f)),
        "aten::div.Scalar": ([_z(2, 4, dtype=f), 0.5], _z(2, 4, dtype=f)),
        "aten::relu.default": ([_z(2, 4)], _z(2, 4)),
        "aten::hardtanh.default": ([_z(2, 4, dtype=f), -1.0, 1.0], _z(2, 4, dtype=f)),
        "aten::clamp.default": ([_z(2, 4), None, 6], _z(2, 4)),
        "aten::sigmoid.default": ([_z(2, 4, dtype=f)], _z(2, 4, dtype=f)),
        "aten::tanh.default": ([_z(2, 4, dtype=f)], _z(2, 4, dtype=f)),
        "aten::mean.dim": ([_z(2, 4, dtype=f), [-1], True, None], _z(2, 1, dtype=f)),
        "aten::_softmax.default": ([_z(2, 4, dtype=f), -1, False], _z(2, 4, dtype=f)),
        "aten::select_copy.int": ([_z(3, 4), 0, 2], _z(4)),
        "aten::view_copy.default": ([_z(2, 4), [8]], _z(8)),
        "aten::squeeze_copy.dims": ([_z(1, 4), [0]], _z(4)),
        "aten::squeeze_copy.dim": ([_z(1, 4), 0], _z(4)),
        "aten::squeeze_copy.default": ([_z(1, 4)], _z(4)),
        "aten::unsqueeze_copy.default": ([_z(4), 0], _z(1, 4)),
        "aten::clone.default": ([_z(2, 4), None], _z(2, 4)),
        "aten::permute_copy.default": ([_z(2, 4), [1, 0]], _z(4, 2)),
        "aten::cat.default": ([[_z(2, 4), _z(2, 4)], 0], _z(4, 4)),
        "aten::slice_copy.Tensor": ([_z(4, 4), 0, 0, 2, 1], _z(2, 4)),
        "dim_order_ops::_clone_dim_order.default": ([_cl(1, 4, 2, 2), False, [0, 2, 3, 1]], _cl(1, 4, 2, 2)),
        "dim_order_ops::_to_dim_order_copy.default": ([_z(2, 4, dtype=f), False, None], _z(2, 4)),
    }
    others.update(_float_kernels_valid())
    args, out = table[op.split("::")[1]] if op.startswith("cortex_m::") else others[op]
    return list(args), out


def _float_kernels_valid() -> dict[str, tuple[list[Any], Any]]:
    """Arguments the float32 kernels' adapters (firmware/ops/aten_float_*.c) accept."""
    f, i64, b = torch.float32, torch.int64, torch.bool

    def x(*shape: int, dtype: torch.dtype = f) -> torch.Tensor:
        return torch.zeros(shape, dtype=dtype)

    unary = ("abs", "neg", "exp", "expm1", "log", "log2", "log10", "log1p", "sqrt", "rsqrt", "reciprocal", "ceil", "floor",
             "round", "trunc", "sign", "erf", "hardswish", "hardsigmoid", "silu")
    v: dict[str, tuple[list[Any], Any]] = {f"aten::{n}.default": ([x(2, 4)], x(2, 4)) for n in unary}
    v.update({f"aten::{n}.{o}": ([x(2, 4), x(2, 4) if o == "Tensor" else 0.5], x(2, 4, dtype=b))
              for n in ("gt", "ge", "lt", "le", "eq", "ne") for o in ("Tensor", "Scalar")})
    v.update({f"aten::logical_{n}.default": ([x(2, 4, dtype=b), x(2, 4)], x(2, 4, dtype=b)) for n in ("and", "or", "xor")})
    v.update({f"aten::bitwise_{n}.Tensor": ([x(2, 4, dtype=b), x(2, 4, dtype=b)], x(2, 4, dtype=b)) for n in ("and", "or", "xor")})
    v.update({
        "aten::gelu.default": ([x(2, 4), "tanh"], x(2, 4)),
        "aten::elu.default": ([x(2, 4), 1.0, 1.0, 1.0], x(2, 4)),
        "aten::leaky_relu.default": ([x(2, 4), 0.1], x(2, 4)),
        "aten::softplus.default": ([x(2, 4), 1.0, 20.0], x(2, 4)),
        "aten::threshold.default": ([x(2, 4), 0.1, 0.0], x(2, 4)),
        "aten::bitwise_not.default": ([x(2, 4, dtype=b)], x(2, 4, dtype=b)),
        "aten::logical_not.default": ([x(2, 4)], x(2, 4, dtype=b)),
        "aten::round.decimals": ([x(2, 4), 2], x(2, 4)),
        "aten::pow.Tensor_Scalar": ([x(2, 4), 2.0], x(2, 4)),
        "aten::fmod.Scalar": ([x(2, 4), 1.5], x(2, 4)),
        "aten::remainder.Scalar": ([x(2, 4), 1.5], x(2, 4)),
        "aten::glu.default": ([x(2, 4), -1], x(2, 2)),
        "aten::maximum.default": ([x(2, 4), x(2, 4)], x(2, 4)),
        "aten::minimum.default": ([x(2, 4, dtype=i64), x(2, 4, dtype=i64)], x(2, 4, dtype=i64)),
        "aten::div.Tensor_mode": ([x(2, 4), x(2, 4), "floor"], x(2, 4)),
        "aten::fmod.Tensor": ([x(2, 4), x(2, 4)], x(2, 4)),
        "aten::remainder.Tensor": ([x(2, 4), x(2, 4)], x(2, 4)),
        "aten::pow.Tensor_Tensor": ([x(2, 4), x(2, 4)], x(2, 4)),
        "aten::pow.Scalar": ([2.0, x(2, 4)], x(2, 4)),
        "aten::atan2.default": ([x(2, 4), x(2, 4)], x(2, 4)),
        "aten::where.self": ([x(2, 4, dtype=b), x(2, 4), x(1, 4)], x(2, 4)),
        "aten::clamp.Tensor": ([x(2, 4), x(2, 4), None], x(2, 4)),
        "aten::convolution.default": ([x(1, 3, 8, 8), x(6, 3, 3, 3), x(6), [1, 1], [0, 0], [1, 1], False, [0, 0], 1],
                                      x(1, 6, 6, 6)),
        "aten::mm.default": ([x(3, 4), x(4, 5)], x(3, 5)),
        "aten::bmm.default": ([x(2, 3, 4), x(2, 4, 5)], x(2, 3, 5)),
        "aten::addmm.default": ([x(5), x(3, 4), x(4, 5), 1, 1], x(3, 5)),
        "aten::linear.default": ([x(2, 3, 4), x(5, 4), None], x(2, 3, 5)),
        "aten::_trilinear.default": ([x(2, 4), x(5, 4, 3), x(2, 3), [1, 3], [0], [1, 2], [2, 3], 1], x(2, 5)),
        "aten::max_pool2d_with_indices.default": ([x(1, 3, 8, 8, dtype=torch.int8), [2, 2], [2, 2], [0, 0], [1, 1], False],
                                                  (x(1, 3, 4, 4, dtype=torch.int8), x(1, 3, 4, 4, dtype=i64))),
        "aten::avg_pool2d.default": ([x(1, 3, 8, 8), [3, 3], [2, 2], [1, 1], True, False, None], x(1, 3, 4, 4)),
        "aten::_adaptive_avg_pool2d.default": ([x(1, 3, 8, 8), [3, 2]], x(1, 3, 3, 2)),
        "aten::adaptive_max_pool2d.default": ([x(3, 8, 8), [3, 2]], (x(3, 3, 2), x(3, 3, 2, dtype=i64))),
        "aten::upsample_nearest2d.vec": ([x(1, 2, 4, 4, dtype=torch.int8), [8, 7], None], x(1, 2, 8, 7, dtype=torch.int8)),
        "aten::upsample_bilinear2d.vec": ([x(1, 2, 4, 4), None, True, [2.0, 2.0]], x(1, 2, 8, 8)),
        "aten::sum.dim_IntList": ([x(2, 4, 3), [1], False, None], x(2, 3)),
        "aten::mean.default": ([x(2, 4), None], x()),
        "aten::prod.dim_int": ([x(2, 4, dtype=i64), 1, False, None], x(2, dtype=i64)),
        "aten::amax.default": ([x(2, 4), [1], True], x(2, 1)),
        "aten::amin.default": ([x(2, 4), [], False], x()),
        "aten::argmax.default": ([x(2, 4), None, False], x(dtype=i64)),
        "aten::argmin.default": ([x(2, 4), 1, False], x(2, dtype=i64)),
        "aten::max.dim": ([x(2, 4), 1, False], (x(2), x(2, dtype=i64))),
        "aten::min.dim": ([x(2, 4), -1, True], (x(2, 1), x(2, 1, dtype=i64))),
        "aten::any.dim": ([x(2, 4, dtype=b), 1, False], x(2, dtype=b)),
        "aten::any.dims": ([x(2, 4), None, False], x(dtype=b)),
        "aten::any.default": ([x(2, 4)], x(dtype=b)),
        "aten::var.correction": ([x(2, 4), [-1], 1, False], x(2)),
        "aten::median.dim": ([x(2, 5), 1, False], (x(2), x(2, dtype=i64))),
        "aten::median.default": ([x(2, 5)], x()),
        "aten::cumsum.default": ([x(2, 4), 1, None], x(2, 4)),
        "aten::_log_softmax.default": ([x(2, 4), -1, False], x(2, 4)),
        "aten::native_layer_norm.default": ([x(2, 3, 8), [8], x(8), x(8), 1e-5], (x(2, 3, 8), x(2, 3, 1), x(2, 3, 1))),
        "aten::native_group_norm.default": ([x(1, 4, 3, 3), x(4), None, 1, 4, 9, 2, 1e-5], (x(1, 4, 3, 3), x(1, 2), x(1, 2))),
        "aten::_native_batch_norm_legit_no_training.default": ([x(1, 4, 3, 3), x(4), x(4), x(4), x(4), 0.1, 1e-5],
                                                               (x(1, 4, 3, 3), x(0), x(0))),
        "aten::_native_batch_norm_legit.no_stats": ([x(1, 4, 3, 3), None, None, True, 0.1, 1e-5], (x(1, 4, 3, 3), x(4), x(4))),
        "aten::expand_copy.default": ([x(4, 1), [3, 4, 5], False], x(3, 4, 5)),
        "aten::repeat.default": ([x(2, 3), [2, 1, 3]], x(2, 2, 9)),
        "aten::flip.default": ([x(2, 3, 4), [0, -1]], x(2, 3, 4)),
        "aten::constant_pad_nd.default": ([x(1, 2, 4, 4), [1, 2, 0, 1], 0.5], x(1, 2, 5, 7)),
        "aten::copy.default": ([x(2, 4), x(4, dtype=i64), False], x(2, 4)),
        "aten::slice_scatter.default": ([x(4, 6), x(4, 2), 1, 1, 5, 2], x(4, 6)),
        "aten::split_with_sizes_copy.default": ([x(3, 10), [2, 8], 1], [x(3, 2), x(3, 8)]),
        "aten::index_select.default": ([x(3, 5), 1, x(2, dtype=i64)], x(3, 2)),
        "aten::embedding.default": ([x(10, 5), x(2, 4, dtype=i64), -1, False, False], x(2, 4, 5)),
        "aten::gather.default": ([x(3, 5), 1, x(3, 4, dtype=i64), False], x(3, 4)),
        "aten::_embedding_bag.default": ([x(10, 4), x(6, dtype=i64), x(2, dtype=i64), False, 1, False, None, False, -1],
                                         (x(2, 4), x(6, dtype=i64), x(2, dtype=i64), x(2, dtype=i64))),
        "aten::index.Tensor": ([x(5, 3), [None, x(2, dtype=i64)]], x(5, 2)),
        "aten::index_put.default": ([x(5, 3), [x(2, dtype=i64)], x(3), True], x(5, 3)),
        "aten::full.default": ([[2, 3], 1.5], x(2, 3)),
        "aten::full_like.default": ([x(2, 3), 0], x(2, 3, dtype=b)),
        "aten::scalar_tensor.default": ([-1.0], x()),
        "aten::arange.default": ([4], x(4, dtype=i64)),
        "aten::arange.start_step": ([0, 1.0, 0.25], x(4)),
        "dim_order_ops::_empty_dim_order.default": ([[2, 3]], x(2, 3)),
    })
    return v


def run(op: str, args: list[Any], out: torch.Tensor) -> str | None:
    try:
        al.ADAPTERS[op](al.Args(op, args, out, lambda v: v if isinstance(v, torch.Tensor) else None))
    except al.Refused as r:
        return str(r)
    return None


def schema_args(op: str) -> list[str]:
    """Argument names of `op` (cortex_m::x, emlkit::x or an edge op ns::name.overload)."""
    ns, _, rest = op.partition("::")
    name, _, overload = rest.partition(".")
    return [a.name for a in getattr(getattr(getattr(torch.ops, ns), name), overload or "default")._schema.arguments]


# C names that are not the schema's: emlkit_qparams_ops.c's requant_args says "multiplier" and "shift".
C_NAME_IN_SCHEMA = {("emlkit::softmax", "multiplier"): "output_multiplier",
                    ("emlkit::softmax", "shift"): "output_shift"}


def arg_index(op: str, name: str) -> int:
    return schema_args(op).index(C_NAME_IN_SCHEMA.get((op, name), name))


def _in_schema(op: str, name: str) -> bool:
    return C_NAME_IN_SCHEMA.get((op, name), name) in schema_args(op)


ALL_LIMITS = c_limits()
LIMITS = [r for r in ALL_LIMITS if _in_schema(r[0], r[2])]


def test_limits_outside_the_schema_are_the_known_ones() -> None:
    # Shared prepare functions check an argument only for the op that has it: cortex_m_pool.c's geometry()
    # dilation (max pool, not avg pool), cortex_m_conv.c's output_padding (transpose) and depth_multiplier
    # (depthwise).
    conv = {f"cortex_m::quantized_{k}conv2d{v}": k for k in ("", "depthwise_", "transpose_") for v in ("", "_nhwc")}
    want = {(f"cortex_m::quantized_avg_pool2d{v}", "dilation") for v in ("", "_nhwc")}
    want |= {(op, "output_padding") for op, k in conv.items() if k != "transpose_"}
    want |= {(op, "depth_multiplier") for op, k in conv.items() if k != "depthwise_"}
    assert {(r[0], r[2]) for r in ALL_LIMITS if r not in LIMITS} == want


def test_the_firmware_has_limits_to_compare() -> None:
    ops = {r[0] for r in LIMITS}
    assert len(LIMITS) > 60 and "cortex_m::quantized_conv2d" in ops and "cortex_m::softmax" in ops


def test_every_adapter_has_a_verifier_entry() -> None:
    # Every registry entry (firmware/ops/*.def) with a prepare function, and nothing else.
    entries = set()
    for path in OPS_DIR.glob("*.def"):
        entries |= {f"{n}.{o}" for n, o in re.findall(r'^ET_OP\("([^"]+)", "([^"]+)", \w+, \w+(?:, \d+)?\)', path.read_text(),
                                                      re.M)}
    assert len(entries) > 40
    assert entries == set(al.REGISTRY_ENTRY.values()) and set(al.REGISTRY_ENTRY) == set(al.ADAPTERS)


def test_aten_checks_report_the_c_adapters_op_names() -> None:
    # Each aten:: entry's message name is the string its C prepare function passes as `op`.
    text = _c_text()
    for key, (_, c_name, _) in al._ATEN.items():
        assert f'"{c_name}"' in text, key


def test_valid_arguments_pass() -> None:
    for op in al.ADAPTERS:
        assert run(op, *valid(op)) is None, op


@pytest.mark.parametrize("op, kind, name, lo, hi, maxn", LIMITS, ids=[f"{r[0]}-{r[2]}" for r in LIMITS])
def test_limit_same_as_firmware(op: str, kind: str, name: str, lo: int | None, hi: int | None, maxn: int) -> None:
    args, out = valid(op)
    i = arg_index(op, name)
    if lo is None or hi is None:    # dtype-dependent range: pad_value of an int8 input
        assert (op, name) == ("cortex_m::pad", "pad_value")
        lo, hi = -128, 127
    for bad in (hi + 1, lo - 1):
        args[i] = bad if kind == "int" else [bad]
        want = (al.c_format(al.FMT_INT_RANGE, op, name, bad, lo, hi) if kind == "int"
                else al.c_format(al.FMT_LIST_RANGE, op, name, 0, bad, lo, hi))
        assert run(op, args, out) == want
    if kind != "int":
        args[i] = [lo] * (maxn + 1)
        assert run(op, args, out) == al.c_format(al.FMT_LIST_LEN, op, name, maxn + 1, maxn)
    for good in (lo, hi):
        args[i] = good if kind == "int" else [good] * min(maxn, 2 if kind == "pair" else maxn)
        got = run(op, args, out)
        assert got is None or f"{name} = " not in got and f"{name}[" not in got, got


def _c_text() -> str:
    text = "".join(p.read_text() for p in [*sorted(OPS_DIR.glob("*.[ch]")), METHOD_C])
    # the loader's PRIu32 is printed as %u: `%" PRIu32 "` inside a literal, `%" PRIu32` at its end
    text = re.sub(r'%"\s*PRIu32(\s*")?', lambda m: "%u" if m.group(1) else '%u"', text)
    return re.sub(r'"\s*\n\s*"', "", text)     # adjacent string literals are one


@pytest.mark.parametrize("name", sorted(n for n in dir(al) if n.startswith("FMT_")))
def test_message_format_is_the_firmwares(name: str) -> None:
    assert f'"{getattr(al, name)}"' in _c_text()


def _tweak(op: str, **changes: Any) -> str | None:
    args, out = valid(op)
    for k, v in changes.items():
        if k == "out":
            out = v
        else:
            args[arg_index(op, k)] = v
    return run(op, args, out)


@pytest.mark.parametrize("op, changes, fmt, fmt_args", [
    ("cortex_m::quantized_conv2d", {"activation_min": 5, "activation_max": 4}, "FMT_ACT", (5, 4)),
    ("cortex_m::quantized_conv2d", {"input": _z(1, 4, 5, 5)}, "FMT_NHWC", ("input", 0, 1, 2, 3)),
    ("cortex_m::quantized_conv2d", {"weight": _z(8, 3, 3, 4, dtype=torch.int16)}, "FMT_DTYPE",
     ("weight", "int8", "int16")),
    ("cortex_m::quantized_conv2d", {"requantize_shifts": torch.tensor([-1] * 7 + [32], dtype=torch.int32)},
     "FMT_REQUANT", ("per-channel", 1 << 30, 32)),
    ("cortex_m::quantized_conv2d", {"requantize_multipliers": torch.tensor([-5] + [1] * 7, dtype=torch.int32)},
     "FMT_REQUANT", ("per-channel", -5, -1)),
    ("cortex_m::quantized_conv2d_nhwc", {"input": _cl(1, 5, 5, 4)}, "FMT_NHWC_VARIANT", ("input",)),
    ("cortex_m::quantized_conv2d", {"weight": _cl(8, 3, 3, 4)}, "FMT_CONTIG",
     ("weight (OHWI / 1HWO as stored by the AoT pass)", 3)),
    ("cortex_m::quantized_transpose_conv2d", {"weight": _z(8, 3, 3, 2)}, "FMT_GROUPED_TRANSPOSE", ()),
    ("cortex_m::quantized_max_pool2d", {"ceil_mode": True}, "FMT_POOL_CEIL", ()),
    ("cortex_m::quantized_max_pool2d", {"output_zero_point": 3}, "FMT_POOL_ZP", (0, 3)),
    ("cortex_m::quantized_max_pool2d", {"dilation": [2, 1]}, "FMT_POOL_DILATION", (2, 1)),
    ("cortex_m::quantized_avg_pool2d", {"padding": [2, 0]}, "FMT_POOL_PADDING", ()),
    ("cortex_m::quantized_linear", {"requantize_multipliers": [], "requantize_shifts": []}, "FMT_LINEAR_ONE_REQUANT",
     ()),
    ("cortex_m::quantized_linear", {"weights": _z(8, 16).t()}, "FMT_CONTIG", ("weights", 1)),
    ("cortex_m::quantized_batch_matmul", {"lhs": _z(2, 16)}, "FMT_RANK", ("lhs", 3, 2)),
    ("cortex_m::softmax", {"output_zero_point": -127}, "FMT_SOFTMAX_ZP", (-127,)),
    ("cortex_m::softmax", {"dim": 2}, "FMT_SOFTMAX_DIM", (2, 2)),
    ("cortex_m::quantized_activation", {"lut": _z(255)}, "FMT_LUT", (255,)),
    ("cortex_m::quantize_per_tensor", {"scale": 0.0}, "FMT_SCALE", (0.0,)),
    ("cortex_m::quantize_per_tensor", {"dtype": torch.int64}, "FMT_QDTYPE", ("int64",)),
    ("cortex_m::quantize_per_tensor", {"quant_min": 5, "quant_max": 4}, "FMT_QRANGE", (5, 4)),
    ("cortex_m::dequantize_per_tensor", {"input": _z(4, dtype=torch.int16)}, "FMT_DTYPE", ("input", "int8", "int16")),
    ("cortex_m::quantized_div", {"self": _z(1, 4, dtype=torch.int32)}, "FMT_DIV_DTYPE", ("int32",)),
    ("cortex_m::minimum", {"self": _z(1, 4, dtype=torch.int64)}, "FMT_MINMAX_DTYPE", ("int64",)),
    ("cortex_m::pad", {"pre_pad": [0, 1]}, "FMT_PAD_LEN", (2, 4)),
    ("cortex_m::pad", {"input": _z(1, 1, 1, 1, 4), "pre_pad": [0, 0, 0, 0]}, "FMT_PAD_RANK", (5,)),
    ("cortex_m::pad", {"input": _z(1, 4, dtype=torch.float32)}, "FMT_PAD_DTYPE", ("float32",)),
])
def test_refusal_message(op: str, changes: dict[str, Any], fmt: str, fmt_args: tuple[Any, ...]) -> None:
    assert _tweak(op, **changes) == al.c_format(getattr(al, fmt), op, *fmt_args)


def test_compile_refuses_what_the_device_would(tmp_path: Path) -> None:
    """A lowered program whose softmax and conv arguments are made out of range is refused by the program
    verifier with the device's message (the real flow: node arguments and constants of an ExportedProgram)."""
    from emlkit.compile import make_options
    from emlkit.lower import cortex_m
    from emlkit.passes.verify_program import VerifyProgram
    from emlkit.targets import get_target

    class M(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv = torch.nn.Conv2d(3, 4, 3)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return torch.softmax(self.conv(x).flatten(1), dim=-1)

    torch.manual_seed(0)
    x = (torch.randn(1, 3, 6, 6),)
    # ExecuTorch's own softmax (cortex_m::softmax, output zero point fixed at -128): without the passes
    # that give softmax its own output qparams and lower it to emlkit::softmax.
    opts = make_options()
    opts.quantizer_hooks = [p for p in opts.quantizer_hooks if type(p).__name__ != "OwnOutputQparams"]
    opts.pre_edge_passes = [p for p in opts.pre_edge_passes if type(p).__name__ not in ("EmlkitSoftmax", "EmlkitAvgPool")]
    low = cortex_m.lower(M().eval(), x, [x], get_target("cortex-m55"), opts)
    ep = low.edge.exported_program()
    check = VerifyProgram()
    check.target = "cortex-m55"
    check(ep)                                   # as lowered: accepted
    sm = next(n for n in ep.graph.nodes if n.op == "call_function" and "softmax" in str(n.target))
    sm.update_arg(3, -127)
    with pytest.raises(AotError) as err:
        check(ep)
    assert err.value.exit_code == EXIT_UNSUPPORTED
    assert al.c_format(al.FMT_SOFTMAX_ZP, "cortex_m::softmax", -127) in str(err.value)
    assert str(err.value).startswith("the firmware would refuse the program for cortex-m55 at load: node ")
    sm.update_arg(3, -128)
    conv = next(n for n in ep.graph.nodes if n.op == "call_function" and "quantized_conv2d" in str(n.target))
    lookup = al.constant_lookup(ep)
    shifts = lookup(al.node_args(conv)[9])
    assert shifts is not None and shifts.dtype == torch.int32
    shifts[0] = 40
    with pytest.raises(AotError, match=re.escape("cortex_m::quantized_conv2d: per-channel multiplier ")):
        check(ep)


@pytest.mark.parametrize("op, changes, fmt, fmt_args", [
    ("emlkit::softmax", {"exp_table": _z(255, dtype=torch.int32)}, "FMT_EXP_TABLE_LEN", (255,)),
    ("emlkit::softmax", {"exp_table": _z(256, dtype=torch.int16)}, "FMT_DTYPE", ("exp_table", "int32", "int16")),
    ("emlkit::softmax", {"out": _z(1, 9)}, "FMT_SAME_LAYOUT", ()),
    ("emlkit::softmax", {"dim": 3}, "FMT_SOFTMAX_DIM", (3, 2)),
    ("emlkit::quantized_avg_pool2d", {"kernel_size": [5, 1]}, "FMT_WINDOW", (5, 1, 4, 4)),
    ("emlkit::quantized_avg_pool2d", {"input": _z(1, 4, 4, 4)}, "FMT_NHWC", ("input", 0, 1, 2, 3)),
    ("emlkit::upsample_nearest2d", {"out": _z(1, 4, 4, 4, dtype=torch.int16)}, "FMT_IO_DTYPE", ("int8", "int16")),
    ("emlkit::upsample_nearest2d", {"x": _z(4, 2, 2), "out": _z(4, 4, 4)}, "FMT_UPSAMPLE_RANK", ()),
    ("emlkit::upsample_nearest2d_index", {"out": _z(1, 4, 3, 5, dtype=torch.int16)}, "FMT_IO_DTYPE",
     ("int8", "int16")),
    ("emlkit::upsample_nearest2d_index", {"x": _z(4, 2, 3), "out": _z(4, 3, 5)}, "FMT_UPSAMPLE_RANK", ()),
    ("emlkit::upsample_nearest2d_index", {"rows": [0, 2, 1]}, "FMT_LIST_RANGE", ("rows", 1, 2, 0, 1)),
    ("emlkit::upsample_nearest2d_index", {"cols": [0, 1, -1, 2, 2]}, "FMT_LIST_RANGE", ("cols", 2, -1, 0, 2)),
    ("emlkit::quantized_layer_norm", {"gain": _z(8, dtype=torch.int8)}, "FMT_LN_DTYPES", ()),
    ("emlkit::quantized_layer_norm", {"x": _z(8, 2).t()}, "FMT_LN_LAYOUT", ()),
    ("emlkit::quantized_layer_norm", {"x": _z(2, 3, 4), "out": _z(2, 3, 4)}, "FMT_LN_LAST_DIM", (8,)),
    ("emlkit::quantized_layer_norm", {"bias": _z(7, dtype=torch.int32)}, "FMT_LN_LAST_DIM", (8,)),
    ("aten::add.Tensor", {"out": _z(2, 4, dtype=torch.float16)}, "FMT_BIN_DTYPE", ("float16",)),
    ("aten::add.Tensor", {"out": _z(2, 4, dtype=torch.int32)}, "FMT_BIN_FLOAT_IN", ("int32",)),
    ("aten::div.Tensor", {"self": _z(2, 4), "other": _z(2, 4), "out": _z(2, 4)}, "FMT_BIN_INT_DIV", ()),
    ("aten::add.Tensor", {"self": _z(2, 4), "other": _z(2, 4), "alpha": 0.5, "out": _z(2, 4)}, "FMT_BIN_FLOAT_SCALAR",
     ()),
    ("aten::mul.Scalar", {"self": _z(2, 4), "out": _z(2, 4)}, "FMT_BIN_FLOAT_SCALAR", ()),
    ("aten::sigmoid.default", {"self": _z(2, 4), "out": _z(2, 4)}, "FMT_UN_FLOAT_ONLY", ("int8",)),
    ("aten::relu.default", {"out": _z(2, 4, dtype=torch.int16)}, "FMT_UN_DTYPES", ()),
    ("aten::clamp.default", {"self": _z(2, 4, dtype=torch.float16), "out": _z(2, 4, dtype=torch.float16)},
     "FMT_BIN_DTYPE", ("float16",)),
    ("aten::mean.dim", {"self": _z(2, 4)}, "FMT_MEAN_F32", ("int8", "float32")),
    ("aten::mean.dim", {"dim": [2]}, "FMT_DIM", (2, 2)),
    ("aten::_softmax.default", {"dim": -3}, "FMT_DIM", (-3, 2)),
    ("aten::_softmax.default", {"out": _z(2, 4)}, "FMT_F32", ()),
    ("aten::select_copy.int", {"dim": 2}, "FMT_SELECT_DIM", ()),
    ("aten::select_copy.int", {"index": -4}, "FMT_SELECT_INDEX", (-4, 3)),
    ("aten::view_copy.default", {"out": _z(8, dtype=torch.int32)}, "FMT_IO_DTYPE", ("int8", "int32")),
    ("aten::permute_copy.default", {"dims": [1, 1]}, "FMT_PERMUTE_REPEAT", ()),
    ("aten::permute_copy.default", {"dims": [0, 2]}, "FMT_DIM", (2, 2)),
    ("aten::cat.default", {"tensors": [_z(2, 4), _z(2, 4, dtype=torch.int16)]}, "FMT_IO_DTYPE", ("int16", "int8")),
    ("aten::slice_copy.Tensor", {"step": 0}, "FMT_SLICE_STEP", ()),
    ("dim_order_ops::_clone_dim_order.default", {"dim_order": [0, 1, 2, 3]}, "FMT_DIM_ORDER_DISAGREE", ()),
    ("dim_order_ops::_clone_dim_order.default", {"dim_order": [0, 2, 3, 4]}, "FMT_DIM_ORDER_RANGE", ()),
    ("dim_order_ops::_clone_dim_order.default", {"dim_order": [0, 2, 3]}, "FMT_DIM_ORDER_RANK", ()),
    ("dim_order_ops::_clone_dim_order.default", {"dim_order": None}, "FMT_DIM_ORDER_NONE", ()),
    # the float32 kernels (aten_float_*.c)
    ("aten::convolution.default", {"input": _z(1, 3, 4, 4, 4, dtype=torch.float32),
                                   "weight": _z(6, 3, 3, 3, 3, dtype=torch.float32)}, "FMT_CONV3D", ()),
    ("aten::convolution.default", {"input": _z(3, dtype=torch.float32)}, "FMT_CONV_RANK", (1, 4)),
    ("aten::exp.default", {"self": _z(2, 4)}, "FMT_DTYPE", ("self", "float32", "int8")),
    ("aten::abs.default", {"out": _z(2, 4, dtype=torch.int32)}, "FMT_UN_DTYPES", ()),
    ("aten::gelu.default", {"approximate": "erf"}, "FMT_WORD", (1, "none", "tanh")),
    ("aten::round.decimals", {"decimals": 31}, "FMT_DECIMALS", (31,)),
    ("aten::div.Tensor_mode", {"self": _z(2, 4, dtype=torch.int64), "other": _z(2, 4, dtype=torch.int64),
                               "rounding_mode": None, "out": _z(2, 4, dtype=torch.int64)}, "FMT_BIN_INT_DIV", ()),
    ("aten::gt.Tensor", {"other": _z(2, 4, dtype=torch.float16)}, "FMT_DTYPE",
     ("other", "float32, an integer or bool", "float16")),
    ("aten::where.self", {"other": _z(2, 4, dtype=torch.int64)}, "FMT_IO_DTYPE", ("int64", "float32")),
    ("aten::sum.dim_IntList", {"dim": [1, -2]}, "FMT_DUP_DIM", (1,)),
    ("aten::argmax.default", {"out": torch.zeros((), dtype=torch.int32)}, "FMT_DTYPE", ("out", "int64", "int32")),
    ("aten::var.correction", {"self": _z(2, 4)}, "FMT_DTYPE", ("self", "float32", "int8")),
    ("aten::_native_batch_norm_legit.no_stats", {"training": False}, "FMT_NO_STATS", ()),
    ("aten::max_pool2d_with_indices.default", {"padding": [2, 2]}, "FMT_POOL_PADDING", ()),
    ("aten::avg_pool2d.default", {"divisor_override": 0}, "FMT_DIVISOR", ()),
    ("aten::upsample_bilinear2d.vec", {"input": _z(2, 4, 4, dtype=torch.float32)}, "FMT_UPSAMPLE_4D", (3,)),
    ("aten::index.Tensor", {"indices": [_z(5, dtype=torch.bool)]}, "FMT_MASK_INDEX", ()),
    ("aten::index_put.default", {"indices": [_z(2, dtype=torch.int64)] * 5, "self": _z(5, 3, 2, 2, 2, dtype=torch.float32),
                                 "out": _z(5, 3, 2, 2, 2, dtype=torch.float32)}, "FMT_INDEX_TENSORS", (4,)),
    ("aten::flip.default", {"dims": [1, -2]}, "FMT_DUP_DIM", (1,)),
])
def test_refusal_message_of_aten_and_emlkit_adapters(op: str, changes: dict[str, Any], fmt: str,
                                                     fmt_args: tuple[Any, ...]) -> None:
    args, out = valid(op)
    a = al.Args(op, args, out, lambda v: v if isinstance(v, torch.Tensor) else None)
    for k, v in changes.items():
        if k == "out":
            a.out = v
        else:
            a.values[arg_index(op, k)] = v
    with pytest.raises(al.Refused) as r:
        al.ADAPTERS[op](a)
    assert str(r.value) == al.c_format(getattr(al, fmt), a.op, *fmt_args)
    assert f'"{a.op}"' in _c_text()    # the op name as the C adapter spells it (aten:: ops: the out variant's)


def _c_bounds(c_file: str, pattern: str) -> list[int]:
    """The integer limits a C condition of firmware/ops/<c_file> compares against (regex groups, in order)."""
    m = re.search(pattern, (OPS_DIR / c_file).read_text())
    assert m, f"{c_file}: the check {pattern!r} is not there any more"
    vals = [_c_int(g) for g in m.groups()]
    assert None not in vals
    return vals  # type: ignore[return-value]


def _range_checks() -> list[tuple[str, str, int, int, str]]:
    """(op, argument, lo, hi, message format) of emlkit_ops.c's hand-written range checks, read from the C source."""
    up = _c_bounds("emlkit_ops.c", r"if \(a\.x < (\d+) \|\| a\.y < \d+ \|\| a\.x > (\d+) \|\| a\.y > \d+\)")
    ln = _c_bounds("emlkit_ops.c", r"if \(eps_term < ([^|]+) \|\| eps_term > ([^|]+) \|\| shift < ([^|]+) \|\| "
                                   r"shift > ([^|]+) \|\| zp < ([^|]+) \|\| zp > ([^)]+)\)")
    return [("emlkit::upsample_nearest2d", "scale_h", up[0], up[1], "FMT_UPSAMPLE_FACTORS"),
            ("emlkit::upsample_nearest2d", "scale_w", up[0], up[1], "FMT_UPSAMPLE_FACTORS"),
            ("emlkit::quantized_layer_norm", "eps_term", ln[0], ln[1], "FMT_LN_RANGE"),
            ("emlkit::quantized_layer_norm", "shift", ln[2], ln[3], "FMT_LN_RANGE"),
            ("emlkit::quantized_layer_norm", "out_zero_point", ln[4], ln[5], "FMT_LN_RANGE")]


@pytest.mark.parametrize("op, name, lo, hi, fmt", _range_checks(), ids=lambda v: str(v))
def test_emlkit_range_same_as_firmware(op: str, name: str, lo: int, hi: int, fmt: str) -> None:
    args, out = valid(op)
    i = arg_index(op, name)
    for bad in (lo - 1, hi + 1):
        args[i] = bad
        want = (al.c_format(al.FMT_UPSAMPLE_FACTORS, op, args[1], args[2]) if fmt == "FMT_UPSAMPLE_FACTORS"
                else al.c_format(al.FMT_LN_RANGE, op))
        assert run(op, args, out) == want
    for good in (lo, hi):
        args[i] = good
        assert run(op, args, out) is None


def test_emlkit_table_and_window_bounds_same_as_firmware() -> None:
    text = (OPS_DIR / "emlkit_qparams_ops.c").read_text()
    assert f"#define EMLKIT_EXP_ONE (1 << {al.EMLKIT_EXP_ONE.bit_length() - 1})" in text
    assert f"#define EMLKIT_MAX_TAPS (1 << {al.EMLKIT_MAX_TAPS.bit_length() - 1})" in text
    assert _c_bounds("emlkit_ops.c", r"n == 0 \|\| n > (\d+) \|\|") == [al.LN_MAX_LAST_DIM]
    op = "emlkit::softmax"
    for k, bad, good in ((0, (0, al.EMLKIT_EXP_ONE + 1), (1, al.EMLKIT_EXP_ONE)),
                         (7, (-1, al.EMLKIT_EXP_ONE + 1), (0, al.EMLKIT_EXP_ONE))):
        fmt = al.FMT_EXP_TABLE_FIRST if k == 0 else al.FMT_EXP_TABLE_ENTRY
        for v in bad:
            args, out = valid(op)
            args[1][k] = v
            assert run(op, args, out) == (al.c_format(fmt, op, v) if k == 0 else al.c_format(fmt, op, k, v))
        for v in good:
            args, out = valid(op)
            args[1][k] = v
            assert run(op, args, out) is None
    op = "emlkit::quantized_avg_pool2d"
    args, out = valid(op)
    args[0] = _cl(1, 1, 256, 257)
    args[1] = [256, 256]
    assert run(op, args, out) is None                     # exactly EMLKIT_MAX_TAPS taps
    args[1] = [256, 257]
    assert run(op, args, out) == al.c_format(al.FMT_TAPS, op, 256, 257, al.EMLKIT_MAX_TAPS)
    op = "emlkit::quantized_layer_norm"
    n = al.LN_MAX_LAST_DIM
    for last, ok in ((n, True), (n + 1, False)):
        g = _z(last, dtype=torch.int32)
        msg = run(op, [_z(1, last), g, g, 1, 10, 0], _z(1, last))
        assert msg == (None if ok else al.c_format(al.FMT_LN_LAST_DIM, op, last))
    # Rows over several dims: the innermost ones in memory (T, C of a contiguous tensor; H, W, C of a
    # channels-last map), not others.
    for x, n, ok in ((_z(2, 3, 4), 12, True), (_cl(1, 4, 3, 5), 60, True), (_cl(1, 4, 3, 5), 15, False),
                     (_cl(1, 4, 3, 5), 20, True), (_z(1, 4, 3, 5), 15, True)):
        g = _z(n, dtype=torch.int32)
        msg = run(op, [x, g, g, 1, 10, 0], torch.empty_like(x))
        assert msg == (None if ok else al.c_format(al.FMT_LN_LAST_DIM, op, n)), (x.shape, n)


def test_compile_refuses_an_emlkit_op_the_device_would() -> None:
    """A real lowered program (its softmax lowered to emlkit::softmax by our passes) made out of range is refused
    by the program verifier with the device's message and EXIT_UNSUPPORTED."""
    from emlkit.compile import make_options
    from emlkit.lower import cortex_m
    from emlkit.passes.verify_program import VerifyProgram
    from emlkit.targets import get_target

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 10), torch.nn.Softmax(dim=-1)).eval()
    x = (torch.randn(1, 8),)
    low = cortex_m.lower(model, x, [x], get_target("cortex-m55"), make_options())
    ep = low.edge.exported_program()
    check = VerifyProgram()
    check.target = "cortex-m55"
    check(ep)
    sm = next(n for n in ep.graph.nodes if n.op == "call_function" and "emlkit" in str(n.target)
              and "softmax" in str(n.target))
    shift = al.node_args(sm)[5]
    sm.update_arg(5, 63)
    with pytest.raises(AotError) as err:
        check(ep)
    assert err.value.exit_code == EXIT_UNSUPPORTED
    assert al.c_format(al.FMT_INT_RANGE, "emlkit::softmax", "shift", 63, 1, 62) in str(err.value)
    sm.update_arg(5, shift)
    table = al.constant_lookup(ep)(al.node_args(sm)[1])
    assert table is not None
    table[3] = -1
    with pytest.raises(AotError, match=re.escape(al.c_format(al.FMT_EXP_TABLE_ENTRY, "emlkit::softmax", 3, -1))):
        check(ep)


def test_loader_aliasing_check_on_a_real_program() -> None:
    """The emitted program of a real model passes the loader's aliasing check; with one kernel's output moved over
    its input (as a damaged memory plan would), compile refuses it with the loader's message and EXIT_INTERNAL."""
    from executorch.exir import ExecutorchBackendConfig

    from emlkit.compile import make_options
    from emlkit.errors import EXIT_INTERNAL
    from emlkit.lower import cortex_m
    from emlkit.passes.verify_program import check_memory_plan
    from emlkit.targets import get_target

    assert re.search(r'"corrupt program: instruction %" PRIu32 " writes its output over its argument %" PRIu32',
                     METHOD_C.read_text())
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.ReLU(), torch.nn.Conv2d(4, 4, 1)).eval()
    x = (torch.randn(1, 3, 8, 8),)
    low = cortex_m.lower(model, x, [x], get_target("cortex-m55"), make_options())
    prog = low.edge.to_executorch(config=ExecutorchBackendConfig(extract_delegate_segments=False)).executorch_program
    assert al.check_aliasing(prog) is None
    check_memory_plan(prog, "cortex-m55")
    plan = prog.execution_plan[0]
    calls = [(pc, ins.instr_args.args) for pc, ins in enumerate(i for c in plan.chains for i in c.instructions)
             if type(ins.instr_args).__name__ == "KernelCall" and "conv" in plan.operators[ins.instr_args.op_index].name]
    pc, args = calls[-1]
    out_t, in_t = plan.values[args[-1]].val, plan.values[args[0]].val
    assert in_t.allocation_info is not None and out_t.allocation_info is not None
    saved = out_t.allocation_info
    out_t.allocation_info = in_t.allocation_info
    assert al.check_aliasing(prog) == al.c_format(al.FMT_OVERLAP, pc, 0)
    with pytest.raises(AotError) as err:
        check_memory_plan(prog, "cortex-m55")
    assert err.value.exit_code == EXIT_INTERNAL
    assert str(err.value).startswith("the firmware would refuse the program for cortex-m55 at load: corrupt program: ")
    out_t.allocation_info = saved
    assert al.check_aliasing(prog) is None


def test_window_bias_forms_checked_like_the_firmware() -> None:
    """cortex_m_conv.c conv_window_bias, mirrored: the entries WindowBias puts after the multipliers (the folded
    window bias, padded to 4 channels for a convolution; the depthwise 16-channel blocks) must agree with the
    weights, bias, multipliers and shifts; each disagreement gives the firmware's message."""
    from emlkit.passes.window_bias import dw_blocks

    conv, dw, tr = "cortex_m::quantized_conv2d", "cortex_m::quantized_depthwise_conv2d", \
        "cortex_m::quantized_transpose_conv2d"
    m8, _ = _requant(8)
    ext = torch.cat([m8, _z(8, dtype=torch.int32)])     # zero weights and bias: every start value is 0
    assert _tweak(conv, requantize_multipliers=ext) is None
    bad = ext.clone()
    bad[8 + 3] = 5
    assert _tweak(conv, requantize_multipliers=bad) == al.c_format(al.FMT_WINDOW_BIAS, conv, 3, 5, 0)
    # 6 channels: 6 start values and 2 padding entries
    m6, s6 = _requant(6)
    six = {"weight": _z(6, 3, 3, 4), "bias": _z(6, dtype=torch.int32), "requantize_shifts": s6, "out": _cl(1, 6, 3, 3)}
    ext6 = torch.cat([m6, _z(8, dtype=torch.int32)])
    assert _tweak(conv, requantize_multipliers=ext6, **six) is None
    ext6[6 + 7] = 1
    assert _tweak(conv, requantize_multipliers=ext6, **six) == al.c_format(al.FMT_WINDOW_BIAS_PAD, conv, 7, 1)
    # depthwise, 4 channels: 4 start values, then one block of 16 channels
    m4, s4 = _requant(4)
    blk = torch.cat([m4, _z(4, dtype=torch.int32), dw_blocks(_z(4, dtype=torch.int32), m4, s4)])
    assert blk.numel() == 8 + 48 and _tweak(dw, requantize_multipliers=blk) is None
    bad = blk.clone()
    bad[4 + 1] += 1    # channel 1's start value: checked against the weights
    assert _tweak(dw, requantize_multipliers=bad) == al.c_format(al.FMT_WINDOW_BIAS, dw, 1, 1, 0)
    # entries of the blocks (start value, multiplier, shift), past out_c too
    for i, ch, what, want in ((8 + 1, 1, "folded window bias", 0), (8 + 16 + 2, 2, "multiplier", 1 << 30),
                              (8 + 32 + 5, 5, "shift", 0)):
        bad = blk.clone()
        bad[i] += 1
        assert _tweak(dw, requantize_multipliers=bad) == al.c_format(al.FMT_DW_BLOCK, dw, ch, what, want + 1, want)
    # a transposed convolution takes none of these forms
    assert _tweak(tr, requantize_multipliers=ext) == al.c_format(al.FMT_EXT_FORM, tr, 16, 8)
