"""Model files and calibration data in, clear errors out."""

from __future__ import annotations

import hashlib
import importlib.util
import logging
import sys
from dataclasses import dataclass
from pathlib import Path

import torch

from aot import models
from aot.errors import AotError

log = logging.getLogger(__name__)


@dataclass
class LoadedModel:
    name: str
    module: torch.nn.Module
    inputs: tuple[torch.Tensor, ...]
    source: str          # zoo name or file path
    fingerprint: str     # hash of the model source, for caches


def _as_input_tuple(obj: object, what: str) -> tuple[torch.Tensor, ...]:
    if isinstance(obj, torch.Tensor):
        return (obj,)
    if isinstance(obj, (tuple, list)) and obj and all(isinstance(t, torch.Tensor) for t in obj):
        return tuple(obj)
    raise AotError(f"{what} must be a tensor or a tuple of tensors, got {type(obj).__name__}")


def load_model(spec: str) -> LoadedModel:
    """MODEL is a zoo name or a path to a .py file defining ModelUnderTest and ModelInputs."""
    path = Path(spec)
    if spec in models.ZOO:
        zm = models.build(spec)
        src = Path(models.__file__).parent / f"{spec}.py"
        return LoadedModel(spec, zm.module, zm.inputs, spec, hashlib.sha256(src.read_bytes()).hexdigest()[:16])
    if path.suffix != ".py":
        raise AotError(
            f"unknown model '{spec}': give a zoo name ({', '.join(models.ZOO)}) "
            "or a path to a .py file defining ModelUnderTest and ModelInputs"
        )
    if not path.is_file():
        raise AotError(f"model file not found: {spec}")
    mod_name = f"_aot_user_model_{hashlib.sha256(str(path.resolve()).encode()).hexdigest()[:8]}"
    loader = importlib.util.spec_from_file_location(mod_name, path)
    assert loader is not None and loader.loader is not None
    module = importlib.util.module_from_spec(loader)
    sys.modules[mod_name] = module
    try:
        loader.loader.exec_module(module)
    except Exception as exc:  # user code: report, don't crash
        raise AotError(f"model file {spec} failed to import: {type(exc).__name__}: {exc}") from exc
    missing = [a for a in ("ModelUnderTest", "ModelInputs") if not hasattr(module, a)]
    if missing:
        raise AotError(
            f"model file {spec} does not define {' and '.join(missing)}: add `ModelUnderTest = MyModule()` "
            "and `ModelInputs = (example_tensor, ...)`"
        )
    net = module.ModelUnderTest
    if isinstance(net, type) and issubclass(net, torch.nn.Module):
        net = net()
    if not isinstance(net, torch.nn.Module):
        raise AotError(f"ModelUnderTest in {spec} must be a torch.nn.Module, got {type(net).__name__}")
    inputs = _as_input_tuple(module.ModelInputs, f"ModelInputs in {spec}")
    return LoadedModel(path.stem, net.eval(), inputs, str(path), hashlib.sha256(path.read_bytes()).hexdigest()[:16])


def load_calibration(path: str | None, example: tuple[torch.Tensor, ...]) -> list[tuple[torch.Tensor, ...]]:
    """A .pt file holding a list of input tuples (or one tuple); defaults to the example inputs."""
    if path is None:
        return [example]
    p = Path(path)
    if not p.is_file():
        raise AotError(f"calibration file not found: {path}")
    try:
        data = torch.load(p, weights_only=True)
    except Exception as exc:
        raise AotError(f"calibration file {path} is not a torch .pt file of tensors: {exc}") from exc
    if isinstance(data, torch.Tensor) or (isinstance(data, tuple) and all(isinstance(t, torch.Tensor) for t in data)):
        data = [data]
    if not isinstance(data, list) or not data:
        raise AotError(f"calibration file {path} must hold a non-empty list of input tuples")
    samples = [_as_input_tuple(s, f"calibration sample {i} in {path}") for i, s in enumerate(data)]
    for i, s in enumerate(samples):
        if len(s) != len(example) or any(a.shape != b.shape for a, b in zip(s, example)):
            shapes = [tuple(t.shape) for t in s]
            want = [tuple(t.shape) for t in example]
            raise AotError(f"calibration sample {i} in {path} has shapes {shapes}, the model takes {want}")
    log.info("calibrating on %d samples from %s", len(samples), path)
    return samples
