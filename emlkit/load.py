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
from emlkit.model_spec import model_kind

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
    kind = model_kind(spec)  # the CLI's early check: unknown names and missing files
    if kind == "zoo":
        zm = models.build(spec)
        src = Path(models.__file__).parent / f"{spec}.py"
        return LoadedModel(spec, zm.module, zm.inputs, spec, hashlib.sha256(src.read_bytes()).hexdigest()[:16])
    if kind == "case":
        return _load_case_file(spec, path)
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


CALIBRATION_FORMS = ("a .pt file of a list of input tuples, a folder of .npy/.pt files (one sample per file), "
                     "or an .npz (one array per input, sample axis first)")


@dataclass
class CalibrationSet:
    """Calibration samples and where they came from: the compile report's "calibration" entry."""

    samples: list[tuple[torch.Tensor, ...]]
    source: str | None       # the path given, None for the model's example inputs
    kind: str                # "example", "pt", "folder" or "npz"

    def report_entry(self) -> dict[str, object]:
        return {"source": self.source, "kind": self.kind, "samples": len(self.samples)}


def _fmt(t: torch.Tensor | tuple[int, ...], dtype: object = None) -> str:
    if isinstance(t, torch.Tensor):
        shape, dtype = tuple(t.shape), t.dtype
    else:
        shape = tuple(t)
    return f"{str(dtype).replace('torch.', '')} {'x'.join(map(str, shape)) or 'scalar'}"


def _sample_tensor(value: object, like: torch.Tensor, what: str) -> torch.Tensor:
    """VALUE (a tensor or numpy array) as a tensor of LIKE's shape and dtype: the shape must match (a leading batch
    dim of 1 may be left out), float data converts to a float input, integer data to an integer input."""
    import numpy as np

    if isinstance(value, np.ndarray):
        if value.dtype == object or not (np.issubdtype(value.dtype, np.number) or value.dtype == np.bool_):
            raise AotError(f"{what} holds {value.dtype} data: save numeric arrays ({_fmt(like)} per sample)")
        t = torch.from_numpy(np.ascontiguousarray(value))
    elif isinstance(value, torch.Tensor):
        t = value.detach()
    else:
        raise AotError(f"{what} holds a {type(value).__name__}, not a tensor or array: save one "
                       f"{_fmt(like)} tensor per input")
    if tuple(t.shape) != tuple(like.shape):
        if like.dim() >= 1 and like.shape[0] == 1 and tuple(t.shape) == tuple(like.shape[1:]):
            t = t.unsqueeze(0)
        else:
            raise AotError(f"{what} has shape {'x'.join(map(str, t.shape)) or 'scalar'}, the model takes "
                           f"{_fmt(like)}: give samples of the model's input shape (ModelInputs)")
    if t.dtype != like.dtype:
        if like.dtype.is_floating_point and (t.dtype.is_floating_point or not t.dtype.is_complex):
            t = t.to(like.dtype)
        elif not like.dtype.is_floating_point and not t.dtype.is_floating_point:
            t = t.to(like.dtype)
        else:
            raise AotError(f"{what} is {str(t.dtype).replace('torch.', '')}, the model takes {_fmt(like)}: save "
                           f"{str(like.dtype).replace('torch.', '')} data")
    return t.contiguous()


def _check_sample(sample: tuple[object, ...], example: tuple[torch.Tensor, ...], what: str) -> tuple[torch.Tensor, ...]:
    if len(sample) != len(example):
        raise AotError(f"{what} has {len(sample)} input(s), the model takes {len(example)} "
                       f"({', '.join(_fmt(t) for t in example)}): give one tensor per model input")
    return tuple(_sample_tensor(v, like, what if len(example) == 1 else f"{what}, input {k}")
                 for k, (v, like) in enumerate(zip(sample, example)))


def _load_sample_file(p: Path, what: str) -> object:
    """A .pt of tensors (weights only) or a .npy array; bad bytes are one line naming the format expected."""
    import numpy as np

    pt = p.suffix != ".npy"  # a .pt, .pth, or any other name torch.save wrote
    try:
        return torch.load(p, weights_only=True) if pt else np.load(p, allow_pickle=False)
    except Exception as exc:
        kind, fix = ("a torch .pt file of tensors", "torch.save") if pt else ("a numpy .npy array", "numpy.save")
        raise AotError(f"{what} is not {kind} ({type(exc).__name__}: {_first_line(exc)}): save it with {fix}") from None


def _folder_files(p: Path) -> list[Path]:
    return sorted(f for f in p.iterdir() if f.is_file() and f.suffix in (".npy", ".pt"))


def _from_folder(p: Path, example: tuple[torch.Tensor, ...], role: str) -> list[tuple[torch.Tensor, ...]]:
    files = _folder_files(p)
    if not files:
        raise AotError(f"{role} folder {p} has no .npy or .pt files: put one sample per file in it")
    samples = []
    for f in files:
        what = f"{role} file {f}"
        data = _load_sample_file(f, what)
        sample = tuple(data) if isinstance(data, (tuple, list)) else (data,)
        samples.append(_check_sample(sample, example, what))
    return samples


def npz_arrays(path: Path, what: str) -> dict[str, object]:
    """The arrays of an .npz file, by name; an AotError (exit 2) naming the fix when it is not one."""
    import numpy as np

    if not path.is_file():
        raise AotError(f"{what} not found: {path}")
    try:
        with np.load(path, allow_pickle=False) as z:
            return {k: z[k] for k in z.files}
    except Exception as exc:
        raise AotError(f"{what} {path} is not a numpy .npz file ({type(exc).__name__}: {_first_line(exc)}): save "
                       "it with numpy.savez") from None


def samples_from_arrays(arrays: list[object], names: list[str], example: tuple[torch.Tensor, ...],
                        what: str) -> list[tuple[torch.Tensor, ...]]:
    """Samples from one array per model input, sample axis first (array i feeds input i)."""
    if len(arrays) != len(example):
        raise AotError(f"{what} has {len(arrays)} array(s) ({', '.join(names)}) for a model of {len(example)} "
                       f"input(s) ({', '.join(_fmt(t) for t in example)}): save one array per input, sample axis "
                       "first (np.savez(f, x=array[N, ...]))")
    counts = {getattr(a, "shape", (0,))[0] if getattr(a, "ndim", 0) else 0 for a in arrays}
    if len(counts) != 1 or 0 in counts:
        raise AotError(f"{what}: its arrays ({', '.join(names)}) must hold the same, non-zero number of samples on "
                       "their first axis")
    n = counts.pop()
    return [_check_sample(tuple(a[i] for a in arrays), example,  # type: ignore[index]
                          f"{what}, sample {i}") for i in range(n)]


def _from_npz(p: Path, example: tuple[torch.Tensor, ...], role: str) -> list[tuple[torch.Tensor, ...]]:
    arrays = npz_arrays(p, f"{role} file")
    keys = sorted(arrays)
    if not keys:
        raise AotError(f"{role} file {p} holds no arrays: save one array per input with numpy.savez")
    return samples_from_arrays([arrays[k] for k in keys], keys, example, f"{role} file {p}")


def _from_pt(p: Path, example: tuple[torch.Tensor, ...], role: str) -> list[tuple[torch.Tensor, ...]]:
    data = _load_sample_file(p, f"{role} file {p}")
    if isinstance(data, torch.Tensor) or (isinstance(data, tuple) and all(isinstance(t, torch.Tensor) for t in data)):
        data = [data]
    if not isinstance(data, list) or not data:
        raise AotError(f"{role} file {p} must hold a non-empty list of input tuples")
    samples = [_as_input_tuple(s, f"{role} sample {i} in {p}") for i, s in enumerate(data)]
    for i, s in enumerate(samples):
        if len(s) != len(example) or any(a.shape != b.shape for a, b in zip(s, example)):
            shapes = [tuple(t.shape) for t in s]
            want = [tuple(t.shape) for t in example]
            raise AotError(f"{role} sample {i} in {p} has shapes {shapes}, the model takes {want}")
    return samples


def calibration_set(path: str | None, example: tuple[torch.Tensor, ...], role: str = "calibration") -> CalibrationSet:
    """The calibration samples PATH names (CALIBRATION_FORMS), checked against the model's example inputs;
    the example inputs themselves without a path. ROLE names the data in messages ("calibration", "--inputs").
    Bad input: an AotError (exit 2) naming the problem and the fix."""
    if path is None:
        return CalibrationSet([example], None, "example")
    p = Path(path)
    if p.is_dir():
        kind, samples = "folder", _from_folder(p, example, role)
    elif not p.exists():
        raise AotError(f"{role} file not found: {path} (give {CALIBRATION_FORMS})")
    elif p.suffix == ".npz":
        kind, samples = "npz", _from_npz(p, example, role)
    elif p.suffix == ".npy":
        kind, samples = "npy", samples_from_arrays([_load_sample_file(p, f"{role} file {p}")], [p.name], example,
                                                   f"{role} file {p}")
    else:
        kind, samples = "pt", _from_pt(p, example, role)
    log.info("%s: %d samples from %s (%s)", role, len(samples), path, kind)
    return CalibrationSet(samples, str(path), kind)


def load_calibration(path: str | None, example: tuple[torch.Tensor, ...]) -> list[tuple[torch.Tensor, ...]]:
    """The calibration samples of PATH (calibration_set); defaults to the example inputs."""
    return calibration_set(path, example).samples


def calibration_digest(path: str | None) -> str:
    """A hash of the calibration data PATH names, for the compile cache key: a file's bytes, or a folder's sample
    files (names and bytes, in the order they are read); "-" without a path."""
    if not path:
        return "-"
    p = Path(path)
    h = hashlib.sha256()
    if p.is_dir():
        for f in _folder_files(p):
            h.update(f.name.encode() + b"\0" + hashlib.sha256(f.read_bytes()).digest())
    elif p.is_file():
        h.update(p.read_bytes())
    else:
        return "missing"
    return h.hexdigest()[:16]
