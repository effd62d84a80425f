"""Random-model generator: build random valid models, compile, run, check; save every failure as a repro.

Usage:
    .venv/bin/python scripts/fuzz_models.py --target T --count N --seed S
        [--executor auto|qemu|host] [--out DIR] [--timeout S] [--min-snr DB] [--no-shrink]

Model i of a run is drawn from random.Random(f"{seed}:{i}") alone, so any case
can be regenerated from (seed, i). Each model is a chain of blocks over an
[1, C, H, W] feature map drawn from the supported op set: conv, depthwise conv,
pools (avg, max), residual add, gating mul, concat of two branches, channel
slice, reshape/permute round trips, activations, nearest upsample (and, from a stream of
their own, a per-channel PReLU, a non-dividing adaptive average pool or a ConvTranspose2d with output_padding); and a head
that is either the feature map or flatten + Linear (+ softmax).

Per model, a defect is any of:
- crash: an exception other than emlkit's one-line AotError (a traceback);
- refusal that does not name the op: an AotError whose line names no op;
- broken program: the verifier found a float op reading int8 codes (a pattern the quantizer left half done);
- hang: the compile or the run exceeds --timeout;
- wrong answer: the device output differs from the host reference (the bundled
  expected outputs) by any step, or the program's SNR against the PyTorch float
  model is under --min-snr;
- a run that ends in FAIL, CRASH, TIMEOUT or ERROR.
A refusal that names the op (the verifier's "op X ... no firmware kernel", a
float island naming its op, a Vela rejection quoting Vela) and an NPU-model SKIP
that names the command are counted, not defects.

The executor is a parameter: `qemu` runs Cortex-M programs under QEMU on the
target's suite boards in order (`python -m emlkit run` machinery, emlkit.run.execute:
cortex-m0plus on the micro:bit, then the an385-m0plus stand-in for what 16 KiB
cannot hold; cortex-m85 on the labelled an547-u85 stand-in); `host` runs
the same runtime natively, and Ethos-U programs on the NPU functional model.
`auto` is qemu for Cortex-M targets and host for Ethos-U targets (until the
Ethos-U firmware path runs under QEMU, then pass --executor qemu).

Every defect is saved in DIR/defects/ as a standalone model file (ModelUnderTest
+ ModelInputs, no import of this script) after shrinking: blocks are removed one
at a time while the same kind of defect remains. DIR/summary.json has the counts.
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import random
import re
import signal
import sys
import time
import traceback
import warnings
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

# ------------------------------------------------------------------ model specs

ACTS = ["relu", "relu6", "hardtanh", "sigmoid", "tanh", "hardswish", "hardsigmoid", "gelu", "silu", "leaky_relu"]
ACT_CODE = {
    "relu": "F.relu({})", "relu6": "F.relu6({})", "hardtanh": "F.hardtanh({}, -1.0, 1.0)",
    "sigmoid": "torch.sigmoid({})", "tanh": "torch.tanh({})", "hardswish": "F.hardswish({})",
    "hardsigmoid": "F.hardsigmoid({})", "gelu": "F.gelu({})", "silu": "F.silu({})",
    "leaky_relu": "F.leaky_relu({}, 0.1)",
}
BLOCKS = ["conv", "dwconv", "avgpool", "maxpool", "add", "mul", "cat", "slice", "permute", "reshape", "act",
          "upsample"]
LSTM_SHARE = 0.25   # models that end their blocks with an "lstm" block (pixels as a sequence of at most 64 steps)
# Issue 30's int8 extensions that fit the block pattern, drawn from a stream of their own (so earlier seeds make the
# models they made): a per-channel PReLU, an adaptive average pool to a size that does not divide the map, a
# ConvTranspose2d with output_padding. floor_divide and embedding_bag take a second input and do not fit a chain.
EXT_BLOCKS = ["prelu", "adapool", "upconv"]
EXT_SHARE = 0.3
# Issue 30's op families, drawn from a stream of their own (SEED:i:family), so a model without a family block is the
# model the generator made before. Each draw appends one block of a family after the chain (before the LSTM block).
FAMILIES: dict[str, list[str]] = {
    "recurrent": ["rnn", "cell"],
    "attention": ["mha", "encoder", "sdpa", "layernorm", "gelu_tanh", "mha_pad"],
    "activation": ["act2"],
    "resize": ["resize", "convt2d", "convt1d"],
    "movement": ["gconv", "shuffle", "flip", "roll", "pad", "repeat", "expand", "index_select", "gather",
                 "embedding"],
    "reduction": ["pool2", "adapool2", "groupnorm", "instnorm", "batchnorm", "reduce", "argmax"],
    "elementwise": ["scalar", "bcast", "unary", "minmax", "clamp_t"],
}
FAMILY_DRAWS = [0, 1, 1, 2]  # family blocks per model (one draw each)
ACTS2 = ["prelu1", "prelu", "leaky_relu", "elu", "silu", "mish", "softplus", "log_softmax", "threshold"]
SEQ_MAX = 64    # tokens (pixels) of a recurrent or attention block; larger maps are pooled to at most 8x8 first
MAP_MAX = 2048  # elements of a map a block may make


def _divisors(n: int, top: int = 8) -> list[int]:
    return [d for d in range(1, min(n, top) + 1) if n % d == 0]


def _pool_out(n: int, k: int, s: int, p: int, ceil: bool) -> int:
    out = -(-(n + 2 * p - k) // s) + 1 if ceil else (n + 2 * p - k) // s + 1
    # PyTorch drops a last window that would start in the right padding.
    return out - 1 if ceil and (out - 1) * s >= n + p else out


def _family_block(rng: random.Random, kind: str, c: int, h: int, w: int) -> dict[str, Any] | None:
    """Parameters of a KIND block on a (c, h, w) map, or None when KIND does not fit that map."""
    b: dict[str, Any] = {"kind": kind}
    # Each filler acts only on its own kinds (disjoint), so the draws are those of one chain of ifs.
    for fill in (_fill_sequence_block, _fill_layout_block, _fill_map_block):
        if not fill(rng, b, c, h, w):
            return None
    return b


def _fill_sequence_block(rng: random.Random, b: dict[str, Any], c: int, h: int, w: int) -> bool:
    """Add the parameters of a sequence, attention, resize or convolution kind to B; False when it does not fit."""
    kind = b["kind"]
    if kind == "rnn":
        b.update(cell=rng.choice(["LSTM", "GRU"]), hid=rng.choice([4, 8]), layers=rng.choice([1, 2]),
                 bidir=rng.random() < 0.4, batch_first=rng.random() < 0.5)
    elif kind == "cell":
        b.update(cell=rng.choice(["LSTMCell", "GRUCell"]), hid=rng.choice([4, 8]), steps=rng.choice([1, 2]))
    elif kind in ("mha", "encoder"):
        b.update(heads=rng.choice(_divisors(c, 4)), norm_first=rng.random() < 0.5,
                 act=rng.choice(["relu", "gelu"]))
    elif kind == "sdpa":
        b.update(causal=rng.random() < 0.5)
    elif kind == "mha_pad":  # a key padding mask computed from the tokens (emlkit::masked_softmax), half the time
        # with a causal attn_mask too (the two joined by a logical_or of bools)
        b.update(heads=rng.choice(_divisors(c, 4)), threshold=round(rng.uniform(0.0, 1.5), 2),
                 causal=rng.random() < 0.5)
    elif kind == "layernorm":
        if c < 2:
            return False
        b.update(affine=rng.random() < 0.7)
    elif kind == "resize":
        b.update(mode=rng.choice(["bilinear", "nearest"]), align=rng.random() < 0.5,
                 oh=rng.randint(max(1, h // 2), 2 * h), ow=rng.randint(max(1, w // 2), 2 * w))
    elif kind in ("convt2d", "convt1d"):
        k, s = rng.choice([2, 3, 4]), rng.choice([1, 2, 3])
        b.update(cout=rng.choice([4, 8]), k=k, stride=s, pad=rng.randint(0, (k - 1) // 2),
                 outpad=rng.randint(0, s - 1))
        if kind == "convt1d" and h * w > SEQ_MAX:
            return False
    elif kind == "gconv":
        g = rng.choice(_divisors(c))
        b.update(groups=g, cout=g * rng.choice([1, 2]), dil=rng.choice([1, 2]),
                 stride=2 if min(h, w) >= 4 and rng.random() < 0.5 else 1)
    return True


def _fill_layout_block(rng: random.Random, b: dict[str, Any], c: int, h: int, w: int) -> bool:
    """Add the parameters of a data-movement kind (shuffle ... embedding) to B; False when it does not fit."""
    kind = b["kind"]
    if kind == "shuffle":
        gs = [d for d in _divisors(c) if 1 < d < c]
        if not gs:
            return False
        b.update(groups=rng.choice(gs))
    elif kind == "flip":
        b.update(dims=sorted(rng.sample([1, 2, 3], rng.randint(1, 2))))
    elif kind == "roll":
        b.update(dims=sorted(rng.sample([1, 2, 3], rng.randint(1, 2))))
        b.update(shifts=[rng.choice([-2, -1, 1, 2, 3]) for _ in b["dims"]])
    elif kind == "pad":
        b.update(mode=rng.choice(["reflect", "replicate"]), pads=[rng.randint(0, 2) for _ in range(4)])
        if b["mode"] == "reflect" and (max(b["pads"][:2]) >= w or max(b["pads"][2:]) >= h):
            return False
    elif kind == "repeat":
        b.update(reps=[rng.choice([1, 2]) for _ in range(3)])
    elif kind == "expand":
        b.update(dim=rng.choice([1, 2, 3]))
    elif kind == "index_select":
        b.update(dim=rng.choice([1, 2, 3]))
        n = (c, h, w)[b["dim"] - 1]
        b.update(index=[rng.randrange(n) for _ in range(rng.randint(1, n + 1))])
    elif kind == "gather":
        b.update(dim=rng.choice([1, 2, 3]))
    elif kind == "embedding":
        b.update(num=rng.choice([5, 10, 16]))
    return True


def _fill_map_block(rng: random.Random, b: dict[str, Any], c: int, h: int, w: int) -> bool:
    """Add the parameters of a pooling, normalisation or elementwise kind to B; False when it does not fit."""
    kind = b["kind"]
    if kind == "pool2":
        k = rng.choice([2, 3])
        b.update(op=rng.choice(["max", "avg"]), k=k, stride=rng.choice([1, 2]), pad=rng.randint(0, k // 2),
                 ceil=rng.random() < 0.6, include_pad=rng.random() < 0.4)
        if min(h, w) + 2 * b["pad"] < k:
            return False
    elif kind == "adapool2":
        b.update(op=rng.choice(["max", "avg"]), oh=rng.randint(1, h), ow=rng.randint(1, w))
    elif kind == "groupnorm":
        if h * w < 4:
            return False
        b.update(groups=rng.choice(_divisors(c)))
    elif kind in ("instnorm", "batchnorm"):
        if h * w < 4:
            return False
        b.update(affine=rng.random() < 0.5)
    elif kind == "reduce":
        b.update(op=rng.choice(["mean", "sum", "amax", "amin"]), dims=rng.choice([[1], [2], [3], [2, 3]]))
    elif kind in ("argmax", "act2"):
        # A reduction or softmax over a size-1 dim is a constant: nothing to check.
        dims = [d for d, n in ((1, c), (2, h), (3, w)) if n > 1]
        if not dims:
            return False
        b.update(dim=rng.choice(dims))
        if kind == "act2":
            b.update(act=rng.choice(ACTS2), a=round(rng.uniform(0.05, 0.5), 3), t=round(rng.uniform(-0.5, 0.5), 3),
                     slopes=[round(rng.uniform(-0.5, 0.5), 3) for _ in range(c)])
    elif kind == "scalar":
        b.update(op=rng.choice(["+", "-", "*", "/", "rsub"]), v=round(rng.choice([-1, 1]) * rng.uniform(0.25, 3), 3))
    elif kind == "bcast":
        b.update(op=rng.choice(["add", "sub", "mul", "div", "minimum", "maximum"]),
                 other=rng.choice(["channel", "mean", "row", "column"]))
    elif kind == "unary":
        b.update(op=rng.choice(["pow2", "sqrt", "rsqrt", "abs", "neg"]))
    elif kind == "minmax":
        b.update(op=rng.choice(["minimum", "maximum"]))
    return True


@dataclass
class Spec:
    seed: str
    c: int
    h: int
    w: int
    blocks: list[dict[str, Any]] = field(default_factory=list)
    head: dict[str, Any] = field(default_factory=dict)


def _shape_after(c: int, h: int, w: int, b: dict[str, Any]) -> tuple[int, int, int]:
    k = b["kind"]
    if k == "conv":
        s, kk = b["stride"], b["k"]
        return b["cout"], (h + 2 * (kk // 2) - kk) // s + 1, (w + 2 * (kk // 2) - kk) // s + 1
    if k == "dwconv":
        s = b["stride"]
        return c, (h - 1) // s + 1, (w - 1) // s + 1
    if k in ("avgpool", "maxpool"):
        return c, h // 2, w // 2
    if k == "cat":
        return b["c1"] + b["c2"], h, w
    if k == "slice":
        return b["keep"], h, w
    if k == "upsample":
        return c, 2 * h, 2 * w
    if k == "permute":
        return c, w, h
    if k == "lstm":
        return b["hid"] * (2 if b["bidir"] else 1), h, w
    if k == "adapool":
        return c, b["oh"], b["ow"]
    if k == "upconv":
        return c, 2 * h, 2 * w
    return _family_shape(c, h, w, b)


def generate(seed: str) -> Spec:
    rng = random.Random(seed)
    spec = Spec(seed, rng.choice([1, 3, 4, 8]), rng.choice([4, 6, 8, 12, 16]), rng.choice([4, 6, 8, 12, 16]))
    c, h, w = spec.c, spec.h, spec.w
    for _ in range(rng.randint(1, 6)):
        kind = rng.choice(BLOCKS)
        b: dict[str, Any] = {"kind": kind}
        if kind == "conv":
            b.update(cout=rng.choice([4, 8, 12, 16]), k=rng.choice([1, 3, 5]),
                     stride=2 if h >= 8 and w >= 8 and rng.random() < 0.3 else 1,
                     act=rng.choice([None, *ACTS]))
        elif kind == "dwconv":
            b.update(stride=2 if h >= 8 and w >= 8 and rng.random() < 0.3 else 1, act=rng.choice([None, "relu", "relu6"]))
        elif kind in ("avgpool", "maxpool"):
            if h < 4 or w < 4:
                continue
        elif kind == "cat":
            b.update(c1=rng.choice([4, 8]), c2=rng.choice([4, 8]), act1=rng.choice([None, *ACTS]),
                     act2=rng.choice([None, *ACTS]))
        elif kind == "slice":
            if c < 2:
                continue
            b.update(keep=rng.randint(1, c - 1))
        elif kind in ("act",):
            b.update(act=rng.choice(ACTS))
        elif kind == "add":
            b.update(act=rng.choice([None, "relu"]))
        elif kind == "upsample":
            if h * w * c > 2048:
                continue
        spec.blocks.append(b)
        c, h, w = _shape_after(c, h, w, b)
    ext = random.Random(f"{seed}:int8ext")
    if ext.random() < EXT_SHARE:
        b = {"kind": ext.choice(EXT_BLOCKS)}
        if b["kind"] == "prelu":
            b.update(slopes=[round(ext.uniform(-0.5, 0.5), 3) for _ in range(c)])
        elif b["kind"] == "adapool":
            oh = [o for o in range(2, h) if h % o] or [h]
            ow = [o for o in range(2, w) if w % o] or [w]
            b.update(oh=ext.choice(oh), ow=ext.choice(ow))
        if b["kind"] != "upconv" or h * w * c <= 2048:
            spec.blocks.append(b)
            c, h, w = _shape_after(c, h, w, b)
    last = False
    fam = random.Random(f"{seed}:family")
    for _ in range(fam.choice(FAMILY_DRAWS)):
        family = fam.choice(list(FAMILIES))
        kind = fam.choice(FAMILIES[family])
        if (family in ("recurrent", "attention") or kind == "convt1d") and h * w > SEQ_MAX:
            # A sequence of at most 64 pixels: the map pooled to at most 8x8 first.
            pool = {"kind": "adapool", "oh": min(h, 8), "ow": min(w, 8)}
            spec.blocks.append(pool)
            c, h, w = _shape_after(c, h, w, pool)
        fb = _family_block(fam, kind, c, h, w)
        if fb is None:
            continue
        nc, nh, nw = _shape_after(c, h, w, fb)
        if nc * nh * nw > MAP_MAX:
            continue
        spec.blocks.append(fb)
        c, h, w = nc, nh, nw
        if kind == "argmax":  # int64 indices: the model's output, nothing after it
            last = True
            break
    # An LSTM over the map's pixels as a sequence, drawn from a stream of its own, so a seed without one still makes
    # the model it made before LSTMs were drawn.
    extra = random.Random(f"{seed}:lstm")
    if extra.random() < LSTM_SHARE and h * w <= 64 and not last:
        b = {"kind": "lstm", "hid": extra.choice([4, 8, 12]), "layers": extra.choice([1, 1, 2]),
             "bidir": extra.random() < 0.3}
        spec.blocks.append(b)
        c, h, w = _shape_after(c, h, w, b)
    spec.head = {"kind": rng.choice(["map", "linear", "softmax"]), "out": rng.choice([2, 4, 10])}
    if last:
        spec.head["kind"] = "map"
    return spec


def _family_shape(c: int, h: int, w: int, b: dict[str, Any]) -> tuple[int, int, int]:
    k = b["kind"]
    if k == "rnn":
        return b["hid"] * (2 if b["bidir"] else 1), h, w
    if k == "cell":
        return b["hid"], h, w
    if k in ("resize", "adapool2"):
        return c, b["oh"], b["ow"]
    if k == "convt2d":
        grow = b["k"] - 2 * b["pad"] + b["outpad"]
        return b["cout"], (h - 1) * b["stride"] + grow, (w - 1) * b["stride"] + grow
    if k == "convt1d":
        return b["cout"], (h * w - 1) * b["stride"] + b["k"] - 2 * b["pad"] + b["outpad"], 1
    if k == "gconv":
        return b["cout"], (h - 1) // b["stride"] + 1, (w - 1) // b["stride"] + 1
    if k == "pad":
        left, right, top, bottom = b["pads"]
        return c, h + top + bottom, w + left + right
    if k == "repeat":
        return c * b["reps"][0], h * b["reps"][1], w * b["reps"][2]
    if k in ("index_select", "reduce", "argmax"):
        dims = [b["dim"]] if k != "reduce" else b["dims"]
        n = len(b["index"]) if k == "index_select" else 1
        return tuple(n if d in dims else s for d, s in ((1, c), (2, h), (3, w)))  # type: ignore[return-value]
    if k == "pool2":
        return c, *(_pool_out(s, b["k"], b["stride"], b["pad"], b["ceil"]) for s in (h, w))  # type: ignore[return-value]
    return c, h, w


def _tokens(call: str, out: int, h: int, w: int) -> str:
    """x as a sequence of its pixels (1, h*w, channels) through CALL, back to a map of OUT channels."""
    return f"x = {call.format('x.flatten(2).transpose(1, 2)')}.transpose(1, 2).reshape(1, {out}, {h}, {w})"


_ACT2_CODE = {
    "prelu1": "self.b{i}(x)", "prelu": "self.b{i}(x)", "leaky_relu": "F.leaky_relu(x, {a})",
    "elu": "F.elu(x, {elu})", "silu": "F.silu(x)", "mish": "F.mish(x)", "softplus": "F.softplus(x, beta={beta})",
    "log_softmax": "F.log_softmax(x, dim={dim})", "threshold": "F.threshold(x, {t}, {a})",
}
_BINARY = {"add": "x + {y}", "sub": "x - {y}", "mul": "x * {y}", "div": "x / {y}",
           "minimum": "torch.minimum(x, {y})", "maximum": "torch.maximum(x, {y})"}
_UNARY = {"pow2": "x.pow(2)", "sqrt": "torch.sqrt(x.abs() + 0.1)", "rsqrt": "torch.rsqrt(x.abs() + 0.25)",
          "abs": "x.abs()", "neg": "torch.neg(x)"}


def _family_source(i: int, b: dict[str, Any], c: int, h: int, w: int) -> tuple[list[str], list[str]]:
    """(__init__ lines, forward lines) of family block I on a (c, h, w) map; an embedding reads input e{i}."""
    for part in (_sequence_source, _layout_source, _map_source):
        lines = part(i, b, c, h, w)
        if lines is not None:
            return lines
    raise ValueError(f"unknown block kind {b['kind']!r}")


def _sequence_source(i: int, b: dict[str, Any], c: int, h: int, w: int) -> tuple[list[str], list[str]] | None:
    """Lines of a sequence, attention, activation, resize or convolution block I; None for other kinds."""
    k = b["kind"]
    m = f"self.b{i}"
    oc, oh, ow = _family_shape(c, h, w, b)
    if k == "rnn":
        init = [f"{m} = nn.{b['cell']}({c}, {b['hid']}, num_layers={b['layers']}, batch_first={b['batch_first']}, "
                f"bidirectional={b['bidir']})"]
        if b["batch_first"]:
            return init, [_tokens(m + "({})[0]", oc, h, w)]
        return init, [f"x = {m}(x.flatten(2).permute(2, 0, 1))[0].permute(1, 2, 0).reshape(1, {oc}, {h}, {w})"]
    if k == "cell":
        # The pixels as a batch of one step (or two, the second from the first's state).
        init, fwd = [f"{m} = nn.{b['cell']}({c}, {b['hid']})"], [f"t = x.flatten(2)[0].t()", f"s = {m}(t)"]
        fwd += [f"s = {m}(t, s)"] * (b["steps"] - 1)
        state = "s[0]" if b["cell"] == "LSTMCell" else "s"
        return init, fwd + [f"x = {state}.t().reshape(1, {oc}, {h}, {w})"]
    if k == "mha":
        return ([f"{m} = nn.MultiheadAttention({c}, {b['heads']}, batch_first=True)"],
                ["t = x.flatten(2).transpose(1, 2)",
                 f"x = {m}(t, t, t, need_weights=False)[0].transpose(1, 2).reshape(1, {c}, {h}, {w})"])
    if k == "mha_pad":
        pad, causal = f"t[..., 0] > {b['threshold']}", ""
        if b.get("causal"):
            # token 0 is never padding: the causal mask's first query would attend to nothing (NaN in torch)
            pad = f"F.pad(t[:, 1:, 0] > {b['threshold']}, (1, 0))"
            causal = f"attn_mask=nn.Transformer.generate_square_subsequent_mask({h * w}), "
        return ([f"{m} = nn.MultiheadAttention({c}, {b['heads']}, batch_first=True)"],
                ["t = x.flatten(2).transpose(1, 2)",
                 f"x = {m}(t, t, t, {causal}key_padding_mask={pad}, need_weights=False)[0]"
                 f".transpose(1, 2).reshape(1, {c}, {h}, {w})"])
    if k == "encoder":
        return ([f"{m} = nn.TransformerEncoderLayer({c}, {b['heads']}, dim_feedforward={2 * c}, dropout=0.0, "
                 f"activation=\"{b['act']}\", batch_first=True, norm_first={b['norm_first']})"],
                [_tokens(m + "({})", c, h, w)])
    if k == "sdpa":
        return ([f"{m} = nn.Linear({c}, {3 * c})"],
                [f"q, k, v = {m}(x.flatten(2).transpose(1, 2)).chunk(3, dim=-1)",
                 f"x = F.scaled_dot_product_attention(q, k, v, is_causal={b['causal']})"
                 f".transpose(1, 2).reshape(1, {c}, {h}, {w})"])
    if k == "layernorm":
        init = [f"{m} = nn.LayerNorm({c}, elementwise_affine={b['affine']})"]
        if b["affine"]:
            init += [f"nn.init.uniform_({m}.weight, 0.5, 1.5)", f"nn.init.uniform_({m}.bias, -0.5, 0.5)"]
        return init, [_tokens(m + "({})", c, h, w)]
    if k == "gelu_tanh":
        return [], ["x = F.gelu(x, approximate=\"tanh\")"]
    if k == "act2":
        act, a = b["act"], b["a"]
        init = {"prelu1": [f"{m} = nn.PReLU(1, {a})"],
                "prelu": [f"{m} = nn.PReLU({c})", f"{m}.weight.data = torch.tensor({b['slopes']})"]}.get(act, [])
        code = _ACT2_CODE[act].format(i=i, a=a, t=b["t"], dim=b["dim"], elu=round(4 * a, 3), beta=round(1 + 4 * a, 3))
        return init, [f"x = {code}"]
    if k == "resize":
        align = f", align_corners={b['align']}" if b["mode"] == "bilinear" else ""
        return [], [f"x = F.interpolate(x, size=({oh}, {ow}), mode=\"{b['mode']}\"{align})"]
    if k in ("convt2d", "convt1d"):
        dim = "2d" if k == "convt2d" else "1d"
        init = [f"{m} = nn.ConvTranspose{dim}({c}, {b['cout']}, {b['k']}, stride={b['stride']}, padding={b['pad']}, "
                f"output_padding={b['outpad']})"]
        return init, [f"x = {m}(x)" if k == "convt2d" else f"x = {m}(x.flatten(2)).unsqueeze(-1)"]
    if k == "gconv":
        return ([f"{m} = nn.Conv2d({c}, {b['cout']}, 3, {b['stride']}, {b['dil']}, dilation={b['dil']}, "
                 f"groups={b['groups']})"], [f"x = {m}(x)"])
    return None


def _layout_source(i: int, b: dict[str, Any], c: int, h: int, w: int) -> tuple[list[str], list[str]] | None:
    """Lines of a data-movement block I (shuffle ... embedding); None for other kinds."""
    k = b["kind"]
    m = f"self.b{i}"
    if k == "shuffle":
        return [f"{m} = nn.ChannelShuffle({b['groups']})"], [f"x = {m}(x)"]
    if k == "flip":
        return [], [f"x = torch.flip(x, {b['dims']})"]
    if k == "roll":
        return [], [f"x = torch.roll(x, {b['shifts']}, {b['dims']})"]
    if k == "pad":
        return [], [f"x = F.pad(x, {b['pads']}, mode=\"{b['mode']}\")"]
    if k == "repeat":
        return [], [f"x = x.repeat(1, {', '.join(map(str, b['reps']))})"]
    if k == "expand":
        first = ["x[:, :1]", "x[:, :, :1]", "x[:, :, :, :1]"][b["dim"] - 1]
        return [], [f"x = x + {first}.expand(1, {c}, {h}, {w})"]
    if k == "index_select":
        return ([f"self.register_buffer(\"i{i}\", torch.tensor({b['index']}))"],
                [f"x = torch.index_select(x, {b['dim']}, self.i{i})"])
    if k == "gather":
        n = (c, h, w)[b["dim"] - 1]
        return ([f"self.register_buffer(\"i{i}\", torch.randint(0, {n}, (1, {c}, {h}, {w})))"],
                [f"x = torch.gather(x, {b['dim']}, self.i{i})"])
    if k == "embedding":
        return ([f"{m} = nn.Embedding({b['num']}, {c})"],
                [f"x = x + {m}(e{i}).transpose(1, 2).reshape(1, {c}, {h}, {w})"])
    return None


def _map_source(i: int, b: dict[str, Any], c: int, h: int, w: int) -> tuple[list[str], list[str]] | None:
    """Lines of a pooling, normalisation or elementwise block I; None for other kinds."""
    k = b["kind"]
    m = f"self.b{i}"
    if k == "pool2":
        if b["op"] == "max":
            return [], [f"x = F.max_pool2d(x, {b['k']}, {b['stride']}, {b['pad']}, ceil_mode={b['ceil']})"]
        return [], [f"x = F.avg_pool2d(x, {b['k']}, {b['stride']}, {b['pad']}, ceil_mode={b['ceil']}, "
                    f"count_include_pad={b['include_pad']})"]
    if k == "adapool2":
        _, oh, ow = _family_shape(c, h, w, b)
        return [], [f"x = F.adaptive_{b['op']}_pool2d(x, ({oh}, {ow}))"]
    if k == "groupnorm":
        return ([f"{m} = nn.GroupNorm({b['groups']}, {c})", f"nn.init.uniform_({m}.weight, 0.5, 1.5)",
                 f"nn.init.uniform_({m}.bias, -0.5, 0.5)"], [f"x = {m}(x)"])
    if k in ("instnorm", "batchnorm"):
        init = [f"{m} = nn.{'InstanceNorm2d' if k == 'instnorm' else 'BatchNorm2d'}({c}, affine={b['affine']})"]
        if b["affine"]:
            init += [f"nn.init.uniform_({m}.weight, 0.5, 1.5)", f"nn.init.uniform_({m}.bias, -0.5, 0.5)"]
        if k == "batchnorm":  # settled statistics, not the identity a fresh BatchNorm has
            init += [f"{m}.running_mean.uniform_(-0.5, 0.5)", f"{m}.running_var.uniform_(0.5, 2.0)"]
        return init, [f"x = {m}(x)"]
    if k == "reduce":
        return [], [f"x = torch.{b['op']}(x, {tuple(b['dims'])}, keepdim=True)"]
    if k == "argmax":
        return [], [f"x = x.argmax(dim={b['dim']}, keepdim=True)"]
    if k == "scalar":
        return [], [f"x = {b['v']} - x" if b["op"] == "rsub" else f"x = x {b['op']} {b['v']}"]
    if k == "bcast":
        y = {"channel": f"self.p{i}", "mean": "x.mean(dim=(2, 3), keepdim=True)", "row": "x[:, :, :1]",
             "column": "x[:, :, :, :1]"}[b["other"]]
        if b["op"] == "div":  # a denominator away from zero
            y = f"(torch.sigmoid({y}) + 0.5)"
        init = [f"self.p{i} = nn.Parameter(torch.randn(1, {c}, 1, 1))"] if b["other"] == "channel" else []
        return init, [f"x = {_BINARY[b['op']].format(y=y)}"]
    if k == "unary":
        return [], [f"x = {_UNARY[b['op']]}"]
    if k == "minmax":
        return [f"{m} = nn.Conv2d({c}, {c}, 1)"], [f"x = torch.{b['op']}(x, {m}(x))"]
    if k == "clamp_t":
        return ([f"self.register_buffer(\"lo{i}\", -0.1 - 0.9 * torch.rand(1, {c}, 1, 1))",
                 f"self.register_buffer(\"hi{i}\", 0.1 + 0.9 * torch.rand(1, {c}, 1, 1))"],
                [f"x = torch.clamp(x, self.lo{i}, self.hi{i})"])
    return None



# Blocks whose forward is one line and that own no module: the line for block b on a (c, h, w) input.
_ONE_LINE_BLOCKS: dict[str, Any] = {
    "slice": lambda b, c, h, w: f"x = x[:, :{b['keep']}]",
    "permute": lambda b, c, h, w: "x = x.permute(0, 1, 3, 2)",
    "reshape": lambda b, c, h, w: f"x = x.reshape(1, {c}, {h * w}, 1).reshape(1, {c}, {h}, {w})",
    "act": lambda b, c, h, w: f"x = {ACT_CODE[b['act']].format('x')}",
    "upsample": lambda b, c, h, w: "x = F.interpolate(x, scale_factor=2, mode=\"nearest\")",
}

def _base_source(i: int, b: dict[str, Any], c: int, h: int, w: int) -> tuple[list[str], list[str]] | None:
    """(__init__ lines, forward lines) of base or extension block I on a (c, h, w) map; None for a family block."""
    k = b["kind"]
    init: list[str] = []
    fwd: list[str] = []
    if k == "conv":
        init.append(f"self.b{i} = nn.Conv2d({c}, {b['cout']}, {b['k']}, {b['stride']}, {b['k'] // 2})")
        y = f"self.b{i}(x)"
        fwd.append(f"x = {ACT_CODE[b['act']].format(y) if b['act'] else y}")
    elif k == "dwconv":
        init.append(f"self.b{i} = nn.Conv2d({c}, {c}, 3, {b['stride']}, 1, groups={c})")
        y = f"self.b{i}(x)"
        fwd.append(f"x = {ACT_CODE[b['act']].format(y) if b['act'] else y}")
    elif k == "avgpool":
        fwd.append("x = F.avg_pool2d(x, 2)")
    elif k == "maxpool":
        fwd.append("x = F.max_pool2d(x, 2)")
    elif k == "add":
        init.append(f"self.b{i} = nn.Conv2d({c}, {c}, 3, 1, 1)")
        fwd.append(f"x = {ACT_CODE[b['act']].format(f'x + self.b{i}(x)') if b['act'] else f'x + self.b{i}(x)'}")
    elif k == "mul":
        init.append(f"self.b{i} = nn.Conv2d({c}, {c}, 1)")
        fwd.append(f"x = x * torch.sigmoid(self.b{i}(x))")
    elif k == "cat":
        init.append(f"self.b{i}a = nn.Conv2d({c}, {b['c1']}, 1)")
        init.append(f"self.b{i}b = nn.Conv2d({c}, {b['c2']}, 3, 1, 1)")
        ya, yb = f"self.b{i}a(x)", f"self.b{i}b(x)"
        ya = ACT_CODE[b["act1"]].format(ya) if b["act1"] else ya
        yb = ACT_CODE[b["act2"]].format(yb) if b["act2"] else yb
        fwd.append(f"x = torch.cat([{ya}, {yb}], dim=1)")
    elif k in _ONE_LINE_BLOCKS:
        fwd.append(_ONE_LINE_BLOCKS[k](b, c, h, w))
    elif k == "prelu":
        init.append(f"self.b{i} = nn.PReLU({c})")
        init.append(f"self.b{i}.weight.data = torch.tensor({b['slopes']})")
        fwd.append(f"x = self.b{i}(x)")
    elif k == "adapool":
        fwd.append(f"x = F.adaptive_avg_pool2d(x, ({b['oh']}, {b['ow']}))")
    elif k == "upconv":
        init.append(f"self.b{i} = nn.ConvTranspose2d({c}, {c}, 3, stride=2, padding=1, output_padding=1)")
        fwd.append(f"x = self.b{i}(x)")
    elif k == "lstm":
        out = b["hid"] * (2 if b["bidir"] else 1)
        init.append(f"self.b{i} = nn.LSTM({c}, {b['hid']}, num_layers={b['layers']}, batch_first=True, "
                    f"bidirectional={b['bidir']})")
        fwd.append(f"x = self.b{i}(x.flatten(2).transpose(1, 2))[0].transpose(1, 2).reshape(1, {out}, {h}, {w})")
    else:
        return None
    return init, fwd


def source(spec: Spec) -> str:
    """A standalone model file for SPEC (ModelUnderTest + ModelInputs)."""
    init: list[str] = []
    fwd: list[str] = []
    extra_in: list[tuple[str, str]] = []   # (name, example) of the embeddings' index inputs
    c, h, w = spec.c, spec.h, spec.w
    for i, b in enumerate(spec.blocks):
        lines = _base_source(i, b, c, h, w)
        if lines is None:
            lines = _family_source(i, b, c, h, w)
            if b["kind"] == "embedding":
                extra_in.append((f"e{i}", f"torch.randint(0, {b['num']}, (1, {h * w}))"))
        init += lines[0]
        fwd += lines[1]
        c, h, w = _shape_after(c, h, w, b)
    head = spec.head["kind"]
    if head in ("linear", "softmax"):
        init.append(f"self.fc = nn.Linear({c * h * w}, {spec.head['out']})")
        fwd.append("x = self.fc(torch.flatten(x, 1))")
        if head == "softmax":
            fwd.append("x = torch.softmax(x, dim=-1)")
    # Only what the model uses: a repro of a few parameter-free blocks is then a few lines.
    body_init = ("    def __init__(self) -> None:\n        super().__init__()\n"
                 + "".join(f"        {line}\n" for line in init) + "\n") if init else ""
    body_fwd = "\n".join(f"        {line}" for line in fwd)
    imports = "import torch.nn.functional as F\n" if any("F." in line for line in fwd) else ""
    args = "".join(f", {name}: torch.Tensor" for name, _ in extra_in)
    inputs = "".join(f" {example}," for _, example in extra_in)
    return f'''"""Random model {spec.seed!r} from scripts/fuzz_models.py (blocks: {", ".join(b["kind"] for b in spec.blocks) or "none"}; head: {head})."""
import torch
import torch.nn as nn
{imports}
torch.manual_seed(0)


class Fuzz(nn.Module):
{body_init}    def forward(self, x: torch.Tensor{args}) -> torch.Tensor:
{body_fwd}
        return x


ModelUnderTest = Fuzz().eval()
ModelInputs = (torch.randn(1, {spec.c}, {spec.h}, {spec.w}),{inputs})
'''


# ------------------------------------------------------------------ checking

# An AotError line names the op when it quotes an aten/cortex_m/TOSA op, a node, or Vela's own reason.
NAMES_OP = re.compile(r"(aten::\w+|cortex_m::\w+|\bop \S+|node \S+|Vela could not compile|NPU command|"
                      r"float op\(s\) left|lowering failed for [\w-]+: \w+|TOSA lowering)")
# The verifier's "lowered program is broken" and the load check's "the firmware would refuse the program" name the
# node but ask for a report: toolkit defects, no refusals.
BROKEN = re.compile(r"lowered program for [\w-]+ is broken|firmware would refuse the program")


@dataclass
class Outcome:
    index: int
    seed: str
    kind: str                 # pass, refused, skip, defect
    defect: str = ""          # crash, unnamed-refusal, hang, wrong-answer, mismatch, run-error
    detail: str = ""
    snr_db: float | None = None
    seconds: float = 0.0


class _Timeout(Exception):
    pass


def _alarm(_sig: int, _frame: Any) -> None:
    raise _Timeout()


def check(path: Path, target: str, executor: str, outdir: Path, timeout: float, min_snr: float) -> tuple[str, str, str, float | None]:
    """(kind, defect, detail, snr) for one model file."""
    from emlkit.compile import compile_model, make_options
    from emlkit.errors import AotError, cause_chain
    from emlkit.run import execute
    from emlkit.targets import get_target

    tgt = get_target(target)
    # Under QEMU, the target's suite boards in order: a program the first cannot hold (the micro:bit's
    # 16 KiB) runs on the next (the an385-m0plus stand-in), as in the suite.
    boards, sim = (("host",), "auto") if executor == "host" or (executor == "auto" and tgt.flow == "ethos_u") \
        else (tgt.boards, "qemu")
    old = signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(int(timeout))
    try:
        try:
            res = compile_model(str(path), target, outdir, options=make_options())
        except AotError as err:
            line = str(err)
            if any(isinstance(e, _Timeout) for e in cause_chain(err, context=True)):  # our alarm, wrapped by a lowering
                return "defect", "hang", f"no result within {timeout:g} s (in: {line[:120]})", None
            if BROKEN.search(line):
                return "defect", "broken-program", line, None
            if NAMES_OP.search(line):
                return "refused", "", line, None
            return "defect", "unnamed-refusal", line, None
        snr = res.report["numerics"]["snr_db"]
        snr = math.inf if snr == "inf" else float(snr)
        for board in boards:
            o = execute(res, board, sim, timeout, "mve", None)
            if o.status != "SKIP":
                break
    except _Timeout:
        return "defect", "hang", f"no result within {timeout:g} s", None
    except Exception as exc:  # a traceback is a defect by definition
        tb = traceback.format_exception(type(exc), exc, exc.__traceback__)
        return "defect", "crash", f"{type(exc).__name__}: {exc}".splitlines()[0] + " | " + tb[-2].strip()[:300], None
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
    if o.status == "SKIP":
        return "skip", "", o.reason, snr
    if o.status != "PASS":
        return "defect", "mismatch" if o.status == "FAIL" else "run-error", f"{o.status}: {o.reason}", snr
    if not snr >= min_snr:
        return "defect", "wrong-answer", f"SNR {snr:.1f} dB against the float model, floor {min_snr:g} dB", snr
    return "pass", "", f"on {o.board}" if o.board and o.board != boards[0] else "", snr


def shrink(spec: Spec, defect: str, target: str, executor: str, work: Path, timeout: float, min_snr: float) -> Spec:
    """Drop blocks (and the head) one at a time while the same defect remains."""
    cur = spec
    changed = True
    while changed:
        changed = False
        candidates = [Spec(cur.seed, cur.c, cur.h, cur.w, cur.blocks[:i] + cur.blocks[i + 1:], cur.head)
                      for i in range(len(cur.blocks))]
        if cur.head.get("kind") != "map":
            candidates.append(Spec(cur.seed, cur.c, cur.h, cur.w, cur.blocks, {"kind": "map", "out": 0}))
        for cand in candidates:
            if not _valid(cand):
                continue
            p = work / "shrink.py"
            p.write_text(source(cand))
            kind, d, _, _ = check(p, target, executor, work / "shrink-out", timeout, min_snr)
            if kind == "defect" and d == defect:
                cur, changed = cand, True
                break
    return cur


def _valid(spec: Spec) -> bool:
    c, h, w = spec.c, spec.h, spec.w
    for b in spec.blocks:
        if b["kind"] == "slice" and b["keep"] >= c:
            return False
        if b["kind"] in ("avgpool", "maxpool") and (h < 2 or w < 2):
            return False
        if b["kind"] in ("conv", "dwconv") and b.get("stride", 1) == 2 and (h < 2 or w < 2):
            return False
        c, h, w = _shape_after(c, h, w, b)
        if h < 1 or w < 1:
            return False
    # A family block's parameters were drawn for its input shape: the shrunk model must still build and run.
    namespace: dict[str, Any] = {}
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            exec(compile(source(spec), "<shrunk model>", "exec"), namespace)  # noqa: S102 - our own generated text
            namespace["ModelUnderTest"](*namespace["ModelInputs"])
    except Exception:  # any failure means the candidate is not a valid model
        return False
    return True


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--target", required=True)
    ap.add_argument("--count", type=int, default=10)
    ap.add_argument("--seed", default="0")
    ap.add_argument("--start", type=int, default=0, help="first model index (to resume or split a run)")
    ap.add_argument("--executor", choices=["auto", "qemu", "host"], default="auto")
    ap.add_argument("--out", default="out/fuzz")
    ap.add_argument("--timeout", type=float, default=300.0, help="seconds per compile and per run")
    ap.add_argument("--min-snr", type=float, default=15.0, help="SNR floor against the float model (dB)")
    ap.add_argument("--no-shrink", action="store_true")
    args = ap.parse_args(argv)

    from emlkit.logsetup import setup_logging
    from emlkit.targets import get_target

    setup_logging(False)
    warnings.filterwarnings("ignore")
    logging.getLogger("emlkit").setLevel(logging.WARNING)
    get_target(args.target)
    out = Path(args.out) / args.target
    (out / "defects").mkdir(parents=True, exist_ok=True)
    work = out / "work"
    work.mkdir(exist_ok=True)
    results: list[Outcome] = []
    for i in range(args.start, args.start + args.count):
        seed = f"{args.seed}:{i}"
        spec = generate(seed)
        path = work / f"model_{i:05d}.py"
        path.write_text(source(spec))
        t0 = time.monotonic()
        kind, defect, detail, snr = check(path, args.target, args.executor, work / "programs", args.timeout, args.min_snr)
        oc = Outcome(i, seed, kind, defect, detail, snr, round(time.monotonic() - t0, 1))
        if kind == "defect":
            small = spec if args.no_shrink else shrink(spec, defect, args.target, args.executor, work,
                                                       args.timeout, args.min_snr)
            repro = out / "defects" / f"{defect}_{args.seed}_{i:05d}.py"
            # The detail can span lines (a traceback): every line a comment, so the repro still imports.
            note = "".join(f"# {line}\n" for line in f"{args.target}: {defect}: {detail}".splitlines())
            repro.write_text(source(small) + note)
            oc.detail += f" (repro: {repro})"
        else:
            path.unlink()
        results.append(oc)
        print(json.dumps(asdict(oc)), flush=True)
    counts: dict[str, int] = {}
    for r in results:
        counts[r.kind] = counts.get(r.kind, 0) + 1
    summary = {"target": args.target, "seed": args.seed, "start": args.start, "count": len(results),
               "executor": args.executor, "counts": counts,
               "defects": [asdict(r) for r in results if r.kind == "defect"],
               "refusals": sorted({r.detail.split(";")[0][:160] for r in results if r.kind == "refused"})}
    (out / f"summary_{args.seed}_{args.start}.json").write_text(json.dumps(summary, indent=1))
    print(f"{args.target}: {len(results)} models, " + ", ".join(f"{v} {k}" for k, v in sorted(counts.items()))
          + f"; {counts.get('defect', 0)} defects", file=sys.stderr)
    return 1 if counts.get("defect", 0) else 0


if __name__ == "__main__":
    sys.exit(main())
