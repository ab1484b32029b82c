"""A local wheelhouse of a project's dependencies, offline: wheels repacked from this virtualenv.

The wheel test installs the workbench wheel into a fresh virtualenv the way a user does (pip
resolves its declared dependencies), with no network: the machine's local package index lacks
Django 6.1 and the suite reaches no registry, so pip gets ``--no-index --find-links`` a folder of
the dependencies this virtualenv has installed, each packed back into a wheel from the files its
RECORD lists (the files pip unpacked from the wheel it downloaded, with a fresh RECORD). Only the
dependency closure of the requirements asked for is packed: a missing or wrong ``dependencies``
entry in pyproject.toml makes the install or the server in the fresh virtualenv fail.
"""

from __future__ import annotations

import base64
import hashlib
import re
import zipfile
from importlib.metadata import Distribution, distribution
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

_SKIP_METADATA = {"RECORD", "INSTALLER", "REQUESTED", "direct_url.json"}


def closure(requirements: list[str]) -> dict[str, Distribution]:
    """The installed distributions that ``requirements`` need, transitively (markers evaluated
    for this interpreter, extras followed)."""
    found: dict[str, Distribution] = {}
    todo = [(Requirement(text), None) for text in requirements]
    seen: set[tuple[str, frozenset[str]]] = set()
    while todo:
        req, parent_extra = todo.pop()
        if req.marker is not None and not req.marker.evaluate({"extra": parent_extra or ""}):
            continue
        key = (canonicalize_name(req.name), frozenset(req.extras))
        if key in seen:
            continue
        seen.add(key)
        dist = distribution(req.name)
        found[key[0]] = dist
        for text in dist.requires or []:
            sub = Requirement(text)
            if sub.marker is None or sub.marker.evaluate({"extra": ""}):
                todo.append((sub, None))
            for extra in req.extras:
                if sub.marker is not None and sub.marker.evaluate({"extra": extra}):
                    todo.append((sub, extra))
    return found


def _record_line(name: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}"


def repack(dist: Distribution, into: Path) -> Path:
    """``dist`` (installed from a wheel) as a wheel file in ``into``."""
    info = Path(str(dist._path))  # type: ignore[attr-defined]  # the .dist-info folder
    site = info.parent
    wheel_meta = (info / "WHEEL").read_text()
    tags = [t.split("-") for t in re.findall(r"^Tag: (\S+)$", wheel_meta, re.M)] or [["py3", "none", "any"]]
    # the compressed tag set (py2.py3-none-any), as the wheel that was installed was named
    tag = "-".join(".".join(dict.fromkeys(t[i] for t in tags)) for i in range(3))
    name = re.sub(r"[^\w\d.]+", "_", dist.metadata["Name"], flags=re.UNICODE)
    version = dist.version.replace("-", "_")
    target = into / f"{name}-{version}-{tag}.whl"
    records: list[str] = []
    with zipfile.ZipFile(target, "w", zipfile.ZIP_STORED) as wheel:
        for file in dist.files or []:
            path = file.as_posix()
            if path.startswith("..") or "__pycache__" in path or path.endswith(".pyc"):
                continue  # scripts outside site-packages (pip writes them anew) and bytecode
            if path.startswith(info.name + "/") and path.split("/", 1)[1] in _SKIP_METADATA:
                continue
            source = site / path
            if not source.is_file():
                continue
            data = source.read_bytes()
            wheel.writestr(path, data)
            records.append(_record_line(path, data))
        records.append(f"{info.name}/RECORD,,")
        wheel.writestr(f"{info.name}/RECORD", "\n".join(records) + "\n")
    return target


def build(requirements: list[str], into: Path) -> list[Path]:
    into.mkdir(parents=True, exist_ok=True)
    return [repack(dist, into) for dist in closure(requirements).values()]
