"""Model files and calibration data in, clear errors out."""

from __future__ import annotations

import hashlib
import importlib.util
import logging
import sys
from dataclasses import dataclass
from pathlib import Path

import torch

from emlkit import models
from emlkit.errors import AotError

log = logging.getLogger(__name__)


@dataclass
class LoadedModel:
    name: str
    module: torch.nn.Module
    inputs: tuple[torch.Tensor, ...]
    source: str          # zoo name or file path
    fingerprint: str     # hash of the model source, for caches


def _structure(obj: object) -> list | None | bool:
    """The nesting of tuples/lists of tensors in obj: None for a tensor, the list of its items' structures for a
    tuple or list; False when obj holds anything else or an empty sequence."""
    if isinstance(obj, torch.Tensor):
        return None
    if isinstance(obj, (tuple, list)) and obj:
        items = [_structure(o) for o in obj]
        return False if any(i is False for i in items) else items
    return False


def _leaves(obj: object) -> list[torch.Tensor]:
    return [obj] if isinstance(obj, torch.Tensor) else [t for o in obj for t in _leaves(o)]  # type: ignore[union-attr]


def _rebuild(structure: list, flat: list[torch.Tensor]) -> tuple:
    """The nested tuples of `structure`, filled from `flat` in order (consumed)."""
    return tuple(flat.pop(0) if s is None else _rebuild(s, flat) for s in structure)


class FlatInputs(torch.nn.Module):
    """A model whose inputs nest tuples of tensors (e.g. index_put's tuple of index tensors), taking them flat:
    programs and bundled inputs hold a flat list of tensors, so the model is exported through this."""

    def __init__(self, inner: torch.nn.Module, structure: list) -> None:
        super().__init__()
        self.inner = inner
        self.structure = structure

    def forward(self, *flat: torch.Tensor) -> object:
        return self.inner(*_rebuild(self.structure, list(flat)))


def _as_input_tuple(obj: object, what: str) -> tuple[torch.Tensor, ...]:
    if isinstance(obj, torch.Tensor):
        return (obj,)
    if _structure(obj) not in (False, None):
        return tuple(_leaves(obj))
    raise AotError(f"{what} must be a tensor or a tuple of tensors (tuples may nest), got {type(obj).__name__}")


def load_model(spec: str) -> LoadedModel:
    """MODEL is a zoo name, a path to a .py file defining ModelUnderTest and ModelInputs, or a case file (.pt)
    holding the dict {"ModelUnderTest": module, "ModelInputs": tuple} (`emlkit opsuite` writes them)."""
    path = Path(spec)
    if spec in models.ZOO:
        zm = models.build(spec)
        src = Path(models.__file__).parent / f"{spec}.py"
        return LoadedModel(spec, zm.module, zm.inputs, spec, hashlib.sha256(src.read_bytes()).hexdigest()[:16])
    if path.suffix == ".pt":
        return _load_case_file(spec, path)
    if path.suffix != ".py":
        raise AotError(
            f"unknown model '{spec}': give a zoo name ({', '.join(models.ZOO)}), "
            "a path to a .py file defining ModelUnderTest and ModelInputs, or a .pt case file"
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
    return _model_from(spec, path, vars(module), "model file", "add `ModelUnderTest = MyModule()` and "
                       "`ModelInputs = (example_tensor, ...)`")


def _model_from(spec: str, path: Path, found: dict[str, object], what: str, hint: str) -> LoadedModel:
    """The LoadedModel of a model file's or case file's ModelUnderTest and ModelInputs."""
    missing = [a for a in ("ModelUnderTest", "ModelInputs") if a not in found]
    if missing:
        raise AotError(f"{what} {spec} does not define {' and '.join(missing)}: {hint}")
    net = found["ModelUnderTest"]
    if isinstance(net, type) and issubclass(net, torch.nn.Module):
        net = net()
    if not isinstance(net, torch.nn.Module):
        raise AotError(f"ModelUnderTest in {spec} must be a torch.nn.Module, got {type(net).__name__}")
    inputs = _as_input_tuple(found["ModelInputs"], f"ModelInputs in {spec}")
    structure = _structure(found["ModelInputs"])
    if isinstance(structure, list) and any(s is not None for s in structure):
        net = FlatInputs(net, structure)  # nested tuples: the program takes their tensors flat, in order
    return LoadedModel(path.stem, net.eval(), inputs, str(path), hashlib.sha256(path.read_bytes()).hexdigest()[:16])


def _load_case_file(spec: str, path: Path) -> LoadedModel:
    """A case file: torch.save of {"ModelUnderTest": module, "ModelInputs": tuple}. Loading unpickles the
    module, which imports the module that defines its class: run only case files you trust, as model files."""
    if not path.is_file():
        raise AotError(f"case file not found: {spec}")
    try:
        data = torch.load(path, weights_only=False)
    except (ImportError, AttributeError) as exc:  # the pickled class's module or name is gone
        raise AotError(f"case file {spec}: the class of its model cannot be found here ({type(exc).__name__}: "
                       f"{_first_line(exc)}); the module defining it must be importable") from None
    except Exception as exc:
        raise AotError(f"case file {spec} is not a torch .pt file ({type(exc).__name__}: {_first_line(exc)}); save "
                       "the dict {'ModelUnderTest': module, 'ModelInputs': tuple} with torch.save") from None
    if not isinstance(data, dict):
        raise AotError(f"case file {spec} holds a {type(data).__name__}, not the dict "
                       "{'ModelUnderTest': module, 'ModelInputs': tuple}")
    return _model_from(spec, path, data, "case file", "save the dict {'ModelUnderTest': module, "
                       "'ModelInputs': tuple} with torch.save")


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else "no message"


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
