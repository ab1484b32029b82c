"""The project's import graph, module-level AND function-level imports (the layering checks).

    python scripts/import_graph.py            # circles, deferred first-party imports, private names
    python scripts/import_graph.py --json     # the same as JSON (tests/ops/test_layers.py reads it)

A function-level import counts like any other edge: a circle hidden in a function is a circle.
"""

from __future__ import annotations

import ast
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("runs", "playground", "evals", "review", "judges", "accounts", "workbench", "workbench_sdk")
# where a package lives when not at the repository's root (the Python SDK is a project of its own)
PLACES = {"workbench_sdk": ROOT / "sdk" / "python" / "workbench_sdk"}


def package_dir(pkg: str) -> Path:
    return PLACES.get(pkg, ROOT / pkg)


def sources() -> list[Path]:
    """Every first-party module file of PACKAGES (migrations left out)."""
    return [
        path
        for pkg in PACKAGES
        for path in sorted(package_dir(pkg).rglob("*.py"))
        if "migrations" not in path.relative_to(package_dir(pkg)).parts
    ]


def module_name(path: Path) -> str:
    pkg = next(p for p in PACKAGES if path.is_relative_to(package_dir(p)))
    rel = path.relative_to(package_dir(pkg).parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def modules() -> dict[str, Path]:
    return {module_name(path): path for path in sources()}


def _resolve(name: str, known: dict[str, Path]) -> str | None:
    """The first-party module an imported dotted name lives in (longest known prefix)."""
    parts = name.split(".")
    while parts:
        cand = ".".join(parts)
        if cand in known:
            return cand
        parts.pop()
    return None


def edges(known: dict[str, Path]):
    """Yield (importer, imported, lineno, deferred, names) for every first-party import."""
    for mod, path in known.items():
        tree = ast.parse(path.read_text(), str(path))
        is_pkg = path.name == "__init__.py"
        deferred_nodes = set()
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                for sub in ast.walk(node):
                    if isinstance(sub, (ast.Import, ast.ImportFrom)):
                        deferred_nodes.add(id(sub))
        for node in ast.walk(tree):
            # imports for typing only count too: a circle that only type checkers see is one
            deferred = id(node) in deferred_nodes
            if isinstance(node, ast.Import):
                for alias in node.names:
                    target = _resolve(alias.name, known)
                    if target:
                        yield mod, target, node.lineno, deferred, []
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = mod.split(".") if is_pkg else mod.split(".")[:-1]
                    base = base[: len(base) - (node.level - 1)]
                    name = ".".join(base + ([node.module] if node.module else []))
                else:
                    name = node.module or ""
                for alias in node.names:
                    target = _resolve(f"{name}.{alias.name}", known) or _resolve(name, known)
                    if target:
                        yield mod, target, node.lineno, deferred, [alias.name]


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on: set[str] = set()
    stack: list[str] = []
    out: list[list[str]] = []
    counter = 0
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on.add(start)
        while work:
            node, it = work[-1]
            nxt = next(it, None)
            if nxt is not None:
                if nxt not in index:
                    index[nxt] = low[nxt] = counter
                    counter += 1
                    stack.append(nxt)
                    on.add(nxt)
                    work.append((nxt, iter(sorted(graph.get(nxt, ())))))
                elif nxt in on:
                    low[node] = min(low[node], index[nxt])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == node:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
    return out


def report() -> dict:
    known = modules()
    graph: dict[str, set[str]] = {m: set() for m in known}
    deferred = []
    private = []
    for src, dst, line, is_deferred, names in edges(known):
        if src == dst:
            continue
        # a package's __init__ importing its own submodule, or a module importing its package, is no circle
        if dst.startswith(src + ".") or src.startswith(dst + "."):
            if not names or dst.startswith(src + "."):
                continue
        graph[src].add(dst)
        if is_deferred and f"{src}:{line}" not in deferred:
            deferred.append(f"{src}:{line}")
        for n in names:
            if n.startswith("_") and not n.startswith("__"):
                if n == "_jcs":
                    continue
                private.append(f"{src}:{line} imports {dst}.{n}")
    return {"cycles": cycles(graph), "deferred": deferred, "private": private}


if __name__ == "__main__":
    rep = report()
    if "--json" in sys.argv:
        print(json.dumps(rep, indent=1))
    else:
        print(f"circles: {len(rep['cycles'])}")
        for c in rep["cycles"]:
            print("  ", " <-> ".join(c))
        print(f"function-level first-party imports: {len(rep['deferred'])}")
        print(f"imports of private names: {len(rep['private'])}")
        for p in rep["private"]:
            print("  ", p)
