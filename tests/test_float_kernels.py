"""The firmware's portable float32 kernels (firmware/ops/aten_float_*.c) against PyTorch's CPU results.

Each case is a small float model exported to a plain ExecuTorch program (to_edge + to_executorch, the ops a
--allow-float island or a float program keeps), bundled with PyTorch's outputs for two inputs and run on the
host build of the firmware: the runner compares every output within ET_FLOAT_ATOL + ET_FLOAT_RTOL * |expected|
(firmware/runtime/runtime.h; integer and bool outputs exactly). Each case also names the registry entries it
is about, which must be in the program and must have run. Load-time refusals (prepare) and data-dependent
errors come with their messages. The QEMU runs (cortex-m55, and the soft-float Armv6-M image on
an385-m0plus) run one program with several of the kernels on the boards.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from emlkit.deploy.sim_host import run_host

ROOT = Path(__file__).resolve().parent.parent
ATOL, RTOL = (float(re.search(rf"#define ET_FLOAT_{k} (\S+)", (ROOT / "firmware/runtime/runtime.h").read_text()).group(1))
              for k in ("ATOL", "RTOL"))
A = torch.ops.aten


class Fn(nn.Module):
    """forward = f(self, *inputs), with optional submodules."""

    def __init__(self, f: Callable[..., Any], **mods: nn.Module) -> None:
        super().__init__()
        self.f = f
        for k, m in mods.items():
            setattr(self, k, m)

    def forward(self, *xs: torch.Tensor) -> Any:
        return self.f(self, *xs)


@dataclass
class Case:
    id: str
    ops: list[str]                               # registry entries (name.overload) the program must call
    model: Callable[[], nn.Module]
    inputs: Callable[[], tuple[Any, ...]]        # one test case's inputs (called twice)
    preserve: list[Any] = field(default_factory=list)   # edge ops kept whole (not decomposed)
    expected: Callable[..., Any] | None = None   # expected outputs when PyTorch's CPU lacks the kernel


def r(*s: int) -> torch.Tensor:
    return torch.randn(*s)


def pos(*s: int) -> torch.Tensor:
    return torch.rand(*s) * 3 + 0.1


def case(id: str, ops: str, f: Callable[..., Any], inputs: Callable[[], tuple[Any, ...]], **kw: Any) -> Case:
    mods = {k: v for k, v in kw.items() if isinstance(v, nn.Module)}
    rest = {k: v for k, v in kw.items() if not isinstance(v, nn.Module)}
    return Case(id, ops.split(), lambda: Fn(f, **mods), inputs, **rest)


def _cl(x: torch.Tensor) -> torch.Tensor:
    return x.to(memory_format=torch.channels_last)


CONV = [
    case("conv2d", "aten::convolution.out", lambda s, x: s.c(x), lambda: (r(2, 3, 10, 9),),
         c=nn.Conv2d(3, 6, (3, 5), stride=(2, 1), padding=(1, 2))),
    case("conv2d_groups_dilation", "aten::convolution.out", lambda s, x: s.c(x), lambda: (r(1, 6, 11, 10),),
         c=nn.Conv2d(6, 9, 3, groups=3, dilation=(2, 1), bias=False)),
    case("conv2d_depthwise_channels_last", "aten::convolution.out", lambda s, x: s.c(x), lambda: (_cl(r(1, 8, 7, 7)),),
         c=nn.Conv2d(8, 8, 3, padding=1, groups=8)),
    case("conv1d", "aten::convolution.out", lambda s, x: s.c(x), lambda: (r(2, 3, 16),), c=nn.Conv1d(3, 5, 4, stride=2, padding=1)),
    case("conv1d_groups", "aten::convolution.out", lambda s, x: s.c(x), lambda: (r(1, 6, 15),), c=nn.Conv1d(6, 4, 3, groups=2, dilation=3)),
    case("conv_transpose2d", "aten::convolution.out", lambda s, x: s.c(x), lambda: (r(2, 3, 5, 6),),
         c=nn.ConvTranspose2d(3, 4, 3, stride=2, padding=1, output_padding=1)),
    case("conv_transpose2d_groups", "aten::convolution.out", lambda s, x: s.c(x), lambda: (r(1, 4, 5, 5),),
         c=nn.ConvTranspose2d(4, 6, (3, 2), stride=(1, 2), groups=2, dilation=2)),
    case("conv_transpose1d", "aten::convolution.out", lambda s, x: s.c(x), lambda: (r(1, 3, 7),),
         c=nn.ConvTranspose1d(3, 2, 4, stride=3, padding=1, output_padding=2)),
    case("conv2d_padding_modes", "aten::convolution.out aten::index.Tensor_out aten::arange.start_out aten::abs.out",
         lambda s, x: s.a(x) + s.b(x), lambda: (r(1, 2, 6, 7),),
         a=nn.Conv2d(2, 3, 3, padding=1, padding_mode="reflect"), b=nn.Conv2d(2, 3, 3, padding=1, padding_mode="replicate")),
    case("conv2d_circular", "aten::convolution.out aten::copy.out aten::slice_scatter.out dim_order_ops::_empty_dim_order.out",
         lambda s, x: s.c(x), lambda: (r(1, 2, 6, 5),), c=nn.Conv2d(2, 3, 3, padding=1, padding_mode="circular")),
    case("linear_addmm", "aten::addmm.out", lambda s, x: s.l(x), lambda: (r(2, 3, 8),), l=nn.Linear(8, 5)),
    case("linear_mm", "aten::mm.out", lambda s, x: s.l(x), lambda: (r(4, 8),), l=nn.Linear(8, 3, bias=False)),
    case("addmm_beta_alpha", "aten::addmm.out", lambda s, b, x, w: torch.addmm(b, x, w, beta=0.5, alpha=2.0),
         lambda: (r(1, 5), r(3, 4), r(4, 5))),
    case("linear_kept", "aten::linear.out", lambda s, x: s.l(x) + s.m(x), lambda: (r(2, 3, 8),), l=nn.Linear(8, 5),
         m=nn.Linear(8, 5, bias=False), preserve=[A.linear.default]),
    case("bmm_matmul", "aten::bmm.out aten::expand_copy.out", lambda s, x, y: (torch.bmm(x[0], y[0]), x @ y),
         lambda: (r(2, 2, 3, 4), r(2, 2, 4, 5))),
    case("bilinear", "aten::_trilinear.out", lambda s, x, y: s.b(x, y), lambda: (r(3, 4), r(3, 2)), b=nn.Bilinear(4, 2, 5)),
]


def _int8_pool(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    v, i = F.max_pool2d(x.float(), 3, 2, 1, ceil_mode=True, return_indices=True)
    return v.to(torch.int8), i


POOL = [
    case("max_pool2d", "aten::max_pool2d_with_indices.out", lambda s, x: F.max_pool2d(x, 3, 2, 1, dilation=2, ceil_mode=True),
         lambda: (r(2, 3, 12, 11),)),
    case("max_pool2d_indices_channels_last", "aten::max_pool2d_with_indices.out",
         lambda s, x: F.max_pool2d(x, (2, 3), (2, 1), (1, 1), return_indices=True), lambda: (_cl(r(1, 4, 7, 8)),)),
    case("max_pool1d", "aten::max_pool2d_with_indices.out", lambda s, x: F.max_pool1d(x, 3, 2, 1, ceil_mode=True),
         lambda: (r(1, 3, 12),)),
    case("max_pool2d_int8", "aten::max_pool2d_with_indices.out",
         lambda s, x: F.max_pool2d(x, 3, 2, 1, ceil_mode=True, return_indices=True),
         lambda: (torch.randint(-128, 128, (1, 3, 8, 9), dtype=torch.int8),), expected=_int8_pool),
    case("avg_pool2d", "aten::avg_pool2d.out", lambda s, x: (F.avg_pool2d(x, 3, 2, 1, ceil_mode=True, count_include_pad=False),
                                                             F.avg_pool2d(x, (2, 3), (1, 2), (1, 0), ceil_mode=True)),
         lambda: (r(2, 3, 9, 10),)),
    case("avg_pool2d_divisor", "aten::avg_pool2d.out", lambda s, x: F.avg_pool2d(x, 3, 2, 1, divisor_override=5),
         lambda: (r(1, 3, 8, 8),)),
    case("avg_pool1d", "aten::avg_pool2d.out", lambda s, x: F.avg_pool1d(x, 4, 3, 2, count_include_pad=False), lambda: (r(2, 3, 13),)),
    case("adaptive_avg_pool2d", "aten::_adaptive_avg_pool2d.out",
         lambda s, x: (F.adaptive_avg_pool2d(x, (5, 3)), F.adaptive_avg_pool1d(x[0], 4)), lambda: (r(2, 3, 12, 10),)),
    case("adaptive_max_pool2d", "aten::adaptive_max_pool2d.out", lambda s, x: F.adaptive_max_pool2d(x, (5, 3), return_indices=True),
         lambda: (r(1, 3, 12, 10),)),
    case("upsample_bilinear2d", "aten::upsample_bilinear2d.vec_out",
         lambda s, x: (F.interpolate(x, size=(8, 7), mode="bilinear"), F.interpolate(x, size=(9, 3), mode="bilinear", align_corners=True),
                       F.interpolate(x, scale_factor=1.5, mode="bilinear")), lambda: (r(1, 2, 4, 5),)),
    case("upsample_nearest2d", "aten::upsample_nearest2d.vec_out",
         lambda s, x: (F.interpolate(x, size=(8, 7)), F.interpolate(x, scale_factor=2.0), F.interpolate(x, size=(3, 3))),
         lambda: (r(1, 2, 4, 5),)),
]


UNARY = [
    case("abs_neg", "aten::abs.out aten::neg.out", lambda s, x, i: (torch.abs(x), torch.neg(x), torch.abs(i), torch.neg(i)),
         lambda: (r(3, 5), torch.randint(-50, 50, (3, 5), dtype=torch.int32))),
    case("exp_expm1", "aten::exp.out aten::expm1.out", lambda s, x: (torch.exp(x), torch.expm1(x)), lambda: (r(3, 7),)),
    case("logs", "aten::log.out aten::log2.out aten::log10.out aten::log1p.out",
         lambda s, x: (torch.log(x), torch.log2(x), torch.log10(x), torch.log1p(x)), lambda: (pos(3, 7),)),
    case("sqrt_rsqrt_reciprocal", "aten::sqrt.out aten::rsqrt.out aten::reciprocal.out",
         lambda s, x: (torch.sqrt(x), torch.rsqrt(x), torch.reciprocal(x)), lambda: (pos(4, 5),)),
    case("rounding", "aten::ceil.out aten::floor.out aten::round.out aten::trunc.out",
         lambda s, x: (torch.ceil(x), torch.floor(x), torch.round(x), torch.trunc(x)),
         lambda: (torch.cat([torch.arange(-5, 5, 0.5), r(12) * 4]),)),
    case("round_decimals", "aten::round.decimals_out", lambda s, x: (torch.round(x, decimals=2), torch.round(x, decimals=-1)),
         lambda: (r(3, 6) * 50,)),
    case("sign_erf", "aten::sign.out aten::erf.out", lambda s, x: (torch.sign(x), torch.erf(x)),
         lambda: (torch.cat([r(9), torch.zeros(2)]),)),
    case("gelu", "aten::gelu.out", lambda s, x: (F.gelu(x), F.gelu(x, approximate="tanh")), lambda: (r(4, 9) * 3,)),
    case("elu_selu_celu", "aten::elu.out", lambda s, x: (F.elu(x, 0.7), F.selu(x)), lambda: (r(4, 6) * 2,)),
    case("leaky_relu", "aten::leaky_relu.out", lambda s, x: F.leaky_relu(x, 0.2), lambda: (r(4, 6),)),
    case("hard_silu_softplus_threshold", "aten::hardswish.out aten::hardsigmoid.out aten::silu.out aten::softplus.out "
         "aten::threshold.out", lambda s, x: (F.hardswish(x), F.hardsigmoid(x), F.silu(x), F.softplus(x, 2.0, 5.0),
                                              F.threshold(x, 0.1, -2.0)), lambda: (r(4, 8) * 4,),
         preserve=[A.hardswish.default, A.hardsigmoid.default, A.silu.default, A.softplus.default, A.threshold.default]),
    case("glu", "aten::glu.out", lambda s, x: (F.glu(x, 1), F.glu(x, 0)), lambda: (r(4, 6),), preserve=[A.glu.default]),
    case("logsigmoid_softplus_decomposed", "aten::log1p.out aten::exp.out aten::minimum.out aten::full.out aten::where.self_out",
         lambda s, x: (F.logsigmoid(x), F.softplus(x), F.mish(x)), lambda: (r(4, 8) * 5,)),
    case("pow_tensor_scalar", "aten::pow.Tensor_Scalar_out",
         lambda s, x: (x ** 2, x ** 3, x ** 0.5, x ** -1, x ** 1.7, x ** -0.5, torch.square(x)), lambda: (pos(3, 5),)),
    case("fmod_remainder_scalar", "aten::fmod.Scalar_out aten::remainder.Scalar_out",
         lambda s, x: (torch.fmod(x, 1.5), torch.remainder(x, 1.5), torch.remainder(x, -0.7)), lambda: (r(3, 6) * 4,)),
    case("logical_bitwise_not", "aten::logical_not.out aten::bitwise_not.out aten::gt.Scalar_out",
         lambda s, x: (torch.logical_not(x), ~(x > 0.3), torch.logical_not(x > 0).float()), lambda: (r(3, 6).round(),)),
]


BINARY = [
    case("maximum_minimum", "aten::maximum.out aten::minimum.out",
         lambda s, x, y: (torch.maximum(x, y), torch.minimum(x, y[0]), torch.maximum(x.int(), y.int())), lambda: (r(3, 5) * 3, r(3, 5) * 3)),
    case("floor_divide_float", "aten::div.out_mode",
         lambda s, x, y: (torch.floor_divide(x, y), torch.div(x, y, rounding_mode="trunc"), torch.div(x, -2.5, rounding_mode="floor")),
         lambda: (r(4, 6) * 10, r(4, 6) * 3)),
    case("floor_divide_int", "aten::div.out_mode",
         lambda s, x, y: (torch.floor_divide(x, y), torch.div(x, y, rounding_mode="trunc")),
         lambda: (torch.arange(-10, 10).reshape(4, 5), torch.tensor([1, -2, 3, -4, 7]))),
    case("pow_atan2", "aten::pow.Tensor_Tensor_out aten::pow.Scalar_out aten::atan2.out",
         lambda s, x, y: (torch.pow(x, y), torch.pow(2.0, y), torch.atan2(y, x - 1.5)), lambda: (pos(3, 5), r(3, 5))),
    case("fmod_remainder_tensor", "aten::fmod.Tensor_out aten::remainder.Tensor_out",
         lambda s, x, y: (torch.fmod(x, y), torch.remainder(x, y)), lambda: (r(3, 6) * 5, r(6).sign() * (torch.rand(6) + 0.5))),
    case("comparisons", "aten::gt.Tensor_out aten::ge.Tensor_out aten::lt.Tensor_out aten::le.Tensor_out aten::eq.Tensor_out "
         "aten::ne.Tensor_out aten::gt.Scalar_out aten::ge.Scalar_out aten::lt.Scalar_out aten::le.Scalar_out "
         "aten::eq.Scalar_out aten::ne.Scalar_out",
         lambda s, x, y: (x > y, x >= y[0], x < y, x <= y, x == y, x != y, x > 0.1, x >= 0.5, x < -0.2, x <= 0, x == 1.0, x != 0),
         lambda: ((r(3, 4) * 2).round(), (r(3, 4) * 2).round())),
    case("comparisons_int", "aten::gt.Tensor_out aten::le.Scalar_out aten::eq.Scalar_out",
         lambda s, x, y: (x > y, x <= 3, x == 2, x.float() > 0.5), lambda: (torch.randint(-4, 5, (3, 4)), torch.randint(-4, 5, (4,)))),
    case("logical_bitwise", "aten::logical_and.out aten::logical_or.out aten::logical_xor.out aten::bitwise_and.Tensor_out "
         "aten::bitwise_or.Tensor_out aten::bitwise_xor.Tensor_out",
         lambda s, x, y: (torch.logical_and(x, y), torch.logical_or(x, y > 0), torch.logical_xor(x > 0, y), (x > 0) & (y > 0),
                          (x > 0) | (y > 0), (x > 0) ^ (y > 0)), lambda: (r(3, 4).round(), r(3, 4).round())),
    # bools only (the bytes path), broadcast as attention joins its masks: [2, 1, 1, 6] with [6, 6], and a row
    # integer tensors by an integer (torch.roll's index arithmetic under --allow-float)
    case("fmod_remainder_int", "aten::fmod.Scalar_out aten::remainder.Scalar_out",
         lambda s, x: (torch.fmod(x, 3), torch.remainder(x, -4), torch.fmod(x, -1)),
         lambda: (torch.randint(-10, 11, (3, 5)),)),
    case("logical_bools", "aten::logical_and.out aten::logical_or.out aten::logical_xor.out",
         lambda s, x, y: (torch.logical_or(x > 0, y > 0), torch.logical_and(y > 0, x > 0.5), torch.logical_xor(x > 0, y[0] > 0)),
         lambda: (r(2, 1, 1, 6), r(6, 6))),
    # views and selects of a channels-last input (select walks it transposed; unsqueeze of a [N, 1, H, W] one is one
    # block: its bytes are in logical order)
    case("copies_channels_last", "aten::select_copy.int_out aten::unsqueeze_copy.out",
         lambda s, x, y: (x[:, 2] * 2, x[0, :, 1] + 1, y.unsqueeze(0) * 3), lambda: (_cl(r(2, 4, 5, 6)), _cl(r(2, 1, 5, 6)))),
    case("where_masked_fill", "aten::where.self_out aten::scalar_tensor.out aten::gt.Tensor_out",
         lambda s, x, y, m: (torch.where(x > y, x, y * 2), x.masked_fill(m, -5.0), torch.where(m[0], x, y)),
         lambda: (r(4, 5), r(1, 5), torch.rand(4, 5) > 0.5)),
    case("clamp_tensor", "aten::clamp.Tensor_out", lambda s, x, lo, hi: (torch.clamp(x, lo, hi), torch.clamp(x, min=lo[0])),
         lambda: (r(4, 5) * 2, r(4, 5) - 1, r(1, 5) + 1)),
    case("prelu", "aten::gt.Scalar_out aten::where.self_out", lambda s, x: s.p(x) + s.q(x), lambda: (r(2, 3, 4, 4),),
         p=nn.PReLU(3, 0.1), q=nn.PReLU()),
]


REDUCE = [
    case("sum", "aten::sum.IntList_out", lambda s, x, i: (x.sum(1), x.sum((0, 2), keepdim=True), x.sum(), i.sum(-1)),
         lambda: (r(2, 8, 3), torch.randint(-9, 9, (3, 4)))),
    case("mean_all", "aten::mean.dtype_out", lambda s, x: x.mean(), lambda: (r(4, 5),)),
    case("prod", "aten::prod.int_out", lambda s, x: (x.prod(1), x.prod(0, keepdim=True)), lambda: (r(3, 5) + 1.5,)),
    case("amax_amin", "aten::amax.out aten::amin.out", lambda s, x: (torch.amax(x, 1), torch.amin(x, (0, 2), keepdim=True), torch.amin(x)),
         lambda: (r(2, 8, 3),)),
    case("argmax_argmin", "aten::argmax.out aten::argmin.out",
         lambda s, x: (torch.argmax(x, 1), torch.argmax(x), torch.argmin(x, -1, keepdim=True), torch.argmin(x)), lambda: (r(2, 8, 3),)),
    case("max_min_dim", "aten::max.dim_max aten::min.dim_min", lambda s, x: (*torch.max(x, 1), *torch.min(x, -1, keepdim=True)),
         lambda: (r(3, 6, 2),)),
    case("any", "aten::any.out aten::any.dims_out aten::any.all_out",
         lambda s, x: ((x > 1).any(1), (x > 1).any(dim=(0, 2)), (x > 2.5).any(), x.any(-1)), lambda: (r(3, 5, 2).round(),)),
    case("var_std", "aten::var.correction_out aten::sqrt.out",
         lambda s, x: (x.var(-1), x.var((0, 1), correction=0, keepdim=True), x.std(1)), lambda: (r(3, 6, 4),)),
    case("median", "aten::median.dim_values aten::median.out",
         lambda s, x: (torch.median(x, 1)[0], *torch.median(x, 0, keepdim=True), torch.median(x), torch.median(x[:, :4])),
         lambda: (r(5, 7),)),
    # integers (int8 codes after median_on_codes.py): the bisection path, ties everywhere in the second input
    case("median_int", "aten::median.dim_values aten::median.out",
         lambda s, i, j: (torch.median(i, 1)[0], torch.median(i), torch.median(j, 0, keepdim=True)[0], torch.median(j)),
         lambda: (torch.randint(-128, 128, (5, 8), dtype=torch.int8), torch.randint(-3, 3, (6, 4), dtype=torch.int32))),
    case("cumsum", "aten::cumsum.out", lambda s, x, i: (torch.cumsum(x, 1), torch.cumsum(x, 0), torch.cumsum(i, 1)),
         lambda: (r(3, 7), torch.randint(-5, 5, (2, 6)))),
    case("log_softmax", "aten::_log_softmax.out", lambda s, x: (F.log_softmax(x, -1), F.log_softmax(x * 10, 0)), lambda: (r(3, 7),)),
    case("layer_norm", "aten::native_layer_norm.out", lambda s, x: (s.a(x), s.b(x), F.layer_norm(x, (3, 8))),
         lambda: (r(2, 3, 8) * 3 + 1,), a=nn.LayerNorm(8), b=nn.LayerNorm((3, 8), elementwise_affine=False)),
    case("group_norm", "aten::native_group_norm.out", lambda s, x: s.g(x), lambda: (r(2, 6, 3, 4),), g=nn.GroupNorm(3, 6)),
    case("batch_norm_eval", "aten::_native_batch_norm_legit_no_training.out", lambda s, x: s.b(x), lambda: (r(2, 4, 3, 3),),
         b=nn.BatchNorm2d(4)),
    case("instance_norm", "aten::_native_batch_norm_legit.no_stats_out", lambda s, x: s.n(x), lambda: (r(2, 4, 3, 5),),
         n=nn.InstanceNorm2d(4, affine=True)),
]


def _idx(*vals: int) -> torch.Tensor:
    return torch.tensor(vals)


INDEX = [
    case("expand_repeat_flip", "aten::expand_copy.out aten::repeat.out aten::flip.out",
         lambda s, x, y: (x.expand(3, 4, 5), y.repeat(2, 1, 3), torch.flip(y, [0, 2]), torch.flip(y, [-1])),
         lambda: (r(4, 1), r(2, 3, 4))),
    case("constant_pad_nd", "aten::constant_pad_nd.out",
         lambda s, x: (F.pad(x, (1, 2, 0, 1), value=0.5), F.pad(x, (-1, 2, 1, -2)), F.pad(x, (3, 0))), lambda: (r(1, 2, 4, 5),)),
    # Pure crops: of the outermost dim that is not 1 (one run of bytes: the kernel's memcpy path, which
    # patch-based execution cuts its row bands with), and of an inner dim (the general copy).
    case("constant_pad_nd_crop", "aten::constant_pad_nd.out",
         lambda s, x: (F.pad(x, (0, 0, 0, 0, -1, -1)), F.pad(x, (0, 0, 0, 0, -2, 0)), F.pad(x, (0, 0, -1, -2))),
         lambda: (r(1, 4, 5, 3),)),
    case("split", "aten::split_with_sizes_copy.out", lambda s, x: (*torch.split(x, [2, 3, 5], 1), *torch.chunk(x, 3, 0)),
         lambda: (r(3, 10),)),
    case("index_select_embedding_gather", "aten::index_select.out aten::embedding.out aten::gather.out",
         lambda s, x, i, j, k: (torch.index_select(x, 1, i), s.e(j), torch.gather(x, 1, k)),
         lambda: (r(3, 5), _idx(4, 0, 2, 0), torch.randint(0, 10, (2, 3)), torch.randint(0, 5, (3, 4))),
         e=nn.Embedding(10, 4)),
    case("embedding_bag", "aten::_embedding_bag.out",
         lambda s, i, o, w: (s.a(i, o), s.b(i, o), s.c(i, o), s.a(i, o, per_sample_weights=w)),
         lambda: (torch.randint(0, 10, (8,)), _idx(0, 3, 3, 5), torch.rand(8)),
         a=nn.EmbeddingBag(10, 4, mode="sum"), b=nn.EmbeddingBag(10, 4, mode="mean", padding_idx=2),
         c=nn.EmbeddingBag(10, 4, mode="max")),
    case("index_tensor", "aten::index.Tensor_out",
         lambda s, x, i, j: (x[i], x[:, j], x[i[:2], :, j[:2]], x[:, i[:, None], j]),
         lambda: (r(5, 4, 3), _idx(0, 3, -2), _idx(2, 1, -3))),
    case("index_put", "aten::index_put.out",
         lambda s, x, i, j, v: (torch.index_put(x, (i,), v), torch.index_put(x, (i, j), v[:, 0], True),
                                torch.index_put(x, (i, j), torch.tensor(7.0)), torch.index_put(x, (i, i), v[:, 0], True)),
         lambda: (r(5, 4), _idx(0, 2, 2), _idx(1, -1, 1), r(3, 4))),
    case("full_arange", "aten::full_like.out aten::arange.start_out aten::scalar_tensor.out",
         lambda s, x: (x + torch.full_like(x, 2.5), x + torch.arange(0.5, 4.0, 0.5), torch.arange(-3, 18, 3) + x.long()[0],
                       x.masked_fill(x > 0, float("-inf"))), lambda: (r(3, 7),)),
    case("tril", "aten::arange.start_out aten::le.Scalar_out aten::where.self_out", lambda s, x: torch.tril(x), lambda: (r(4, 5),)),
]


MODELS = [
    case("lstm", "aten::addmm.out aten::split_with_sizes_copy.out aten::full.out", lambda s, x: s.l(x),
         lambda: (r(1, 4, 6),), l=nn.LSTM(6, 5, num_layers=2, batch_first=True)),
    case("gru", "aten::addmm.out aten::split_with_sizes_copy.out", lambda s, x: s.g(x)[0], lambda: (r(2, 3, 4),),
         g=nn.GRU(4, 3, batch_first=True)),
    case("transformer_encoder_layer", "aten::native_layer_norm.out aten::bmm.out aten::addmm.out aten::any.out",
         lambda s, x: s.t(x), lambda: (r(1, 5, 16),), t=nn.TransformerEncoderLayer(16, 2, 32, dropout=0.0, batch_first=True)),
    case("causal_attention", "aten::bmm.out aten::logical_and.out aten::arange.start_out aten::where.self_out",
         lambda s, q: F.scaled_dot_product_attention(q, q * 0.5, q, is_causal=True), lambda: (r(1, 2, 4, 8),)),
]

CASES = CONV + POOL + UNARY + BINARY + REDUCE + INDEX + MODELS


def export_program(m: nn.Module, example: tuple[Any, ...], preserve: list[Any]) -> Any:
    from executorch.exir import EdgeCompileConfig, ExecutorchBackendConfig, to_edge

    cfg = EdgeCompileConfig(_check_ir_validity=False, preserve_ops=preserve)
    return to_edge(torch.export.export(m, example, strict=False), compile_config=cfg).to_executorch(ExecutorchBackendConfig())


def bundle(et: Any, inputs: list[tuple[Any, ...]], expected: list[tuple[Any, ...]]) -> bytes:
    from executorch.devtools import BundledProgram
    from executorch.devtools.bundled_program.config import MethodTestCase, MethodTestSuite
    from executorch.devtools.bundled_program.serialize import serialize_from_bundled_program_to_flatbuffer

    tcs = [MethodTestCase(inputs=i, expected_outputs=e) for i, e in zip(inputs, expected)]
    return serialize_from_bundled_program_to_flatbuffer(BundledProgram(et, [MethodTestSuite("forward", tcs)]))


def flat(outs: Any) -> tuple[torch.Tensor, ...]:
    """A model's outputs as the program lists them (nested tuples flattened)."""
    if isinstance(outs, torch.Tensor):
        return (outs,)
    return tuple(t for o in outs for t in flat(o))


def build(c: Case, path: Path, seed: int = 0) -> tuple[Path, list[str]]:
    """The case's bundled program (two test cases) and the operators it calls."""
    torch.manual_seed(seed)
    m = c.model().eval()
    inputs = [c.inputs(), c.inputs()]
    et = export_program(m, inputs[0], c.preserve)
    with torch.no_grad():
        expected = [flat(c.expected(*i) if c.expected else m(*i)) for i in inputs]
    path.write_bytes(bundle(et, inputs, expected))
    ops = [f"{o.name}.{o.overload}" for o in et.executorch_program.execution_plan[0].operators]
    return path, ops


@pytest.mark.parametrize("c", CASES, ids=[c.id for c in CASES])
def test_float_kernel_matches_pytorch(c: Case, tmp_path: Path) -> None:
    bpte, ops = build(c, tmp_path / f"{c.id}.bpte")
    missing = [o for o in c.ops if o not in ops]
    assert not missing, f"the program does not call {missing}: it calls {ops}"
    res = run_host(bpte)
    assert res.status == "pass", (res.error, [(o.max_abs, o.passed) for o in res.outputs])
    assert res.cases == 2
    ran = {o.op for o in res.per_op if o.calls > 0}
    assert {o.rsplit(".", 1)[0] for o in c.ops} <= ran, ran


def test_tolerance_is_the_runtimes() -> None:
    assert (ATOL, RTOL) == (1e-5, 1e-4)


def test_a_wrong_kernel_result_fails(tmp_path: Path) -> None:
    """The comparison can fail: expected outputs off by 10 * tolerance fail the case."""
    c = Case("gelu_off", ["aten::gelu.out"], lambda: Fn(lambda s, x: F.gelu(x)), lambda: (r(3, 4),))
    off = 10 * (ATOL + RTOL * 4)
    c.expected = lambda x: F.gelu(x) + off
    bpte, _ = build(c, tmp_path / "off.bpte")
    res = run_host(bpte)
    assert res.status == "fail" and all(o.max_abs is not None and o.max_abs > 9 * ATOL for o in res.outputs)


def _run_error(tmp_path: Path, name: str, model: nn.Module, inputs: tuple[Any, ...], expected: tuple[Any, ...]) -> str:
    from executorch.exir import ExecutorchBackendConfig, to_edge

    et = to_edge(torch.export.export(model, inputs, strict=False)).to_executorch(ExecutorchBackendConfig())
    path = tmp_path / f"{name}.bpte"
    path.write_bytes(bundle(et, [inputs], [expected]))
    res = run_host(path)
    assert res.status == "error", res.raw
    return res.error or ""


def test_conv3d_is_refused_at_load_by_name(tmp_path: Path) -> None:
    err = _run_error(tmp_path, "c3d", nn.Conv3d(2, 3, 2).eval(), (r(1, 2, 3, 4, 4),), (torch.zeros(1, 3, 2, 3, 3),))
    assert "aten::convolution.out: 3-D convolution (5-D input) is not supported; 1-D and 2-D are" in err
    assert "(aten::convolution.out)" in err        # "instruction N (op.overload): reason", at load


def test_index_out_of_range_stops_the_program(tmp_path: Path) -> None:
    emb = Fn(lambda s, i: s.e(i), e=nn.Embedding(10, 3)).eval()
    err = _run_error(tmp_path, "emb", emb, (torch.tensor([1, 10]),), (torch.zeros(2, 3),))
    assert "aten::embedding.out: index 10 is out of range for size 10" in err
    sel = Fn(lambda s, x, i: torch.index_select(x, 0, i)).eval()
    err = _run_error(tmp_path, "sel", sel, (r(4, 2), torch.tensor([0, -5])), (torch.zeros(2, 2),))
    assert "aten::index_select.out: index -5 is out of range for size 4" in err


def test_integer_division_by_zero_stops_the_program(tmp_path: Path) -> None:
    fd = Fn(lambda s, x, y: torch.floor_divide(x, y)).eval()
    err = _run_error(tmp_path, "fd", fd, (torch.tensor([3, 4]), torch.tensor([1, 0])), (torch.zeros(2, dtype=torch.int64),))
    assert "aten::div.out_mode: integer division by zero" in err


# ---- on the boards, under QEMU ----

def _board_program(tmp_path: Path) -> bytes:
    """One float program with several of the kernels: conv, pools, gelu, layer norm, linear, softmax, argmax."""
    model = Fn(lambda s, x: (
        s.fc(s.ln(F.gelu(s.conv(x)).flatten(2).transpose(1, 2))).amax(1),
        torch.argmax(F.max_pool2d(s.conv(x), 2, ceil_mode=True).flatten(1), 1),
        F.interpolate(F.adaptive_avg_pool2d(x, (2, 3)), size=(4, 5), mode="bilinear"),
        torch.where(x > 0, x, torch.exp(x) - 1).sum(-1)),
        conv=nn.Conv2d(3, 4, 3, padding=1), ln=nn.LayerNorm(4), fc=nn.Linear(4, 6))
    c = Case("board", [], lambda: model, lambda: (r(1, 3, 5, 6),))
    path, _ = build(c, tmp_path / "board.bpte")
    return path.read_bytes()


@pytest.mark.slow
@pytest.mark.parametrize("board", ["corstone-300", "an385-m0plus"])
def test_float_kernels_on_the_board(board: str, tmp_path: Path) -> None:
    """cortex-m55 (hard float, Helium) and the Armv6-M soft-float image (cortex-m0plus on the an385-m0plus
    stand-in): the board's own image of this program's operators, under QEMU."""
    import shutil

    from emlkit.deploy.program_image import program_image
    from emlkit.deploy.sim_qemu import run_qemu

    if shutil.which("qemu-system-arm") is None or shutil.which("arm-none-eabi-gcc") is None:
        pytest.skip("qemu-system-arm or arm-none-eabi-gcc not installed")
    bpte = _board_program(tmp_path)
    elf = program_image(board, None, bpte).elf
    res = run_qemu(bpte, board, elf=elf, timeout=300)
    assert res.status == "pass", res.console[-3000:]
    assert res.run is not None and res.run.cases == 2
    ran = {o.op for o in res.run.per_op}
    assert {"aten::convolution", "aten::gelu", "aten::native_layer_norm", "aten::max_pool2d_with_indices",
            "aten::upsample_bilinear2d", "aten::argmax", "aten::where"} <= ran, ran
