"""Large JSON data files read through a compact on-disk copy, keyed by their content's hash.

A shipped calibration is ~15 MB of JSON whose bulk is numbers: matrices of measured shapes
(lists of equal-length lists of floats) and tables of grid cells (string -> float). Parsing
makes ~10^6 Python objects and is most of a command's start-up. The first read of a file
writes its numbers as one float64 array, its cell names as one string and the rest as a
small JSON skeleton, in a numpy `.npz` (no pickles); later reads of the same bytes load that
instead. Matrices come back as numpy arrays, everything else as `json.loads` gives it.

The JSON stays the source of truth: the copy is named by the SHA-256 of the file's bytes, so
an edited or replaced file is never answered from an old copy. Where the copy cannot be
written (a read-only home, a full disk) the JSON is parsed every time; results are the same.
The directory is perfcast._cache.cache_dir() (`$PERFCAST_CACHE_DIR`, ...;
`PERFCAST_CACHE_DIR=` turns the copies off).
"""

from __future__ import annotations

import contextlib
import gc
import hashlib
import json
from pathlib import Path
from typing import Any

import numpy as np

from perfcast._cache import cache_dir, write_atomically

__all__ = ["cache_dir", "read_json_data"]

FORMAT = 1  # bump when the packing changes: old copies are then ignored (and pruned)
_MATRIX, _CELLS = "\x00matrix", "\x00cells"  # markers no JSON document of ours uses
_MIN_CELLS = 4  # smaller str -> float tables stay in the skeleton
_SEP = "\x00"


def read_json_data(path: Path | Any) -> Any:
    """The file's JSON document, numeric matrices as numpy arrays (module docstring); `path`
    is a filesystem path or an importlib.resources file of a package's data."""
    raw = path.read_bytes()
    folder = cache_dir()
    if folder is None:
        return _parse(raw)
    name = f"{Path(str(path)).stem}-{hashlib.sha256(raw).hexdigest()[:32]}-v{FORMAT}.npz"
    copy = folder / name
    try:
        with np.load(copy, allow_pickle=False) as packed:
            return _unpack(packed)
    except (OSError, ValueError, KeyError):
        pass  # no copy yet, or an unreadable one: parse, and (re)write it
    data = _parse(raw)
    _write(folder, copy, data)
    return data


def _parse(raw: bytes) -> Any:
    # ~10^6 dicts and lists, none in a cycle: the collections their allocation would
    # trigger find nothing (~1/3 of the parse time)
    collecting = gc.isenabled()
    gc.disable()
    try:
        return json.loads(raw)
    finally:
        if collecting:
            gc.enable()


def _write(folder: Path, copy: Path, data: Any) -> None:
    floats: list[float] = []
    names: list[str] = []
    try:
        skeleton = _pack(data, floats, names)
    except ValueError:  # a document the packing cannot represent: no copy, parse each time
        return
    head = json.dumps({"names": len(names), "root": skeleton}).encode()
    if not write_atomically(copy, lambda out: np.savez(
            out, skeleton=np.frombuffer(head, np.uint8),
            floats=np.asarray(floats, dtype=np.float64),
            names=np.frombuffer(_SEP.join(names).encode(), np.uint8))):
        return
    stem = copy.name.rsplit("-", 2)[0]
    with contextlib.suppress(OSError):
        for old in folder.glob(f"{stem}-*.npz"):  # copies of earlier versions of the file
            if old != copy and old.name.rsplit("-", 2)[0] == stem:
                old.unlink(missing_ok=True)


def _pack(node: Any, floats: list[float], names: list[str]) -> Any:
    """The skeleton of `node`: matrices and large cell tables replaced by markers whose
    numbers and names are appended to `floats` and `names`."""
    if isinstance(node, dict):
        if any(isinstance(k, str) and k.startswith("\x00") for k in node):
            raise ValueError("a key the markers would shadow")
        if len(node) >= _MIN_CELLS and all(type(v) is float for v in node.values()) \
                and not any(_SEP in k for k in node):
            start, first = len(floats), len(names)
            floats.extend(node.values())
            names.extend(node)
            return {_CELLS: [start, len(node), first]}
        return {k: _pack(v, floats, names) for k, v in node.items()}
    if isinstance(node, list):
        if _is_matrix(node):
            start = len(floats)
            for row in node:
                floats.extend(row)
            return {_MATRIX: [start, len(node), len(node[0])]}
        return [_pack(v, floats, names) for v in node]
    return node


def _is_matrix(node: list) -> bool:
    if not node or not isinstance(node[0], list) or not node[0]:
        return False
    width = len(node[0])
    return all(isinstance(r, list) and len(r) == width and all(type(v) is float for v in r)
               for r in node)


def _unpack(packed: Any) -> Any:
    head = json.loads(packed["skeleton"].tobytes())
    names = packed["names"].tobytes().decode().split(_SEP) if head["names"] else []
    return _rebuild(head["root"], packed["floats"], names)


def _rebuild(node: Any, floats: np.ndarray, names: list[str]) -> Any:
    if isinstance(node, dict):
        if _MATRIX in node:
            start, rows, cols = node[_MATRIX]
            return floats[start:start + rows * cols].reshape(rows, cols)
        if _CELLS in node:
            start, n, first = node[_CELLS]
            return dict(zip(names[first:first + n], floats[start:start + n].tolist(),
                            strict=True))
        return {k: _rebuild(v, floats, names) for k, v in node.items()}
    if isinstance(node, list):
        return [_rebuild(v, floats, names) for v in node]
    return node
