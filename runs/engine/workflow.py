"""Workflow specs: defaults, structural checks (a DAG of uniquely named steps) and adjacency."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from runs.engine.errors import EngineError, ErrorCode

GATE_POLICIES = ("AUTO", "PAUSE_BEFORE", "PAUSE_AFTER", "CHECKPOINT")


def _bad(message: str, path: str) -> EngineError:
    return EngineError(ErrorCode.INVALID_WORKFLOW, message, path)


def normalize_workflow(spec: Any) -> dict[str, Any]:
    """Validate a WorkflowSpec and return it with the protocol's defaults filled in.

    Steps get ``gatePolicy: AUTO``, ``inputs: []`` and ``outputs: []`` when absent, the
    spec gets ``edges: []``. Raises ``INVALID_WORKFLOW`` for a malformed spec, duplicate
    step ids, edges to unknown steps, self edges or cycles.
    """
    _check_header(spec)
    steps_in = spec.get("steps")
    if not isinstance(steps_in, list) or not steps_in:
        raise _bad("a workflow needs at least one step", "workflow.steps")
    seen: set[str] = set()
    steps = [_normalize_step(step, f"workflow.steps[{i}]", seen) for i, step in enumerate(steps_in)]
    edges_in = spec.get("edges", [])
    if not isinstance(edges_in, list):
        raise _bad("edges must be a list", "workflow.edges")
    edge_ids: set[str] = set()
    for i, edge in enumerate(edges_in):
        _check_edge(edge, f"workflow.edges[{i}]", edge_ids, seen)
    out = {**spec, "steps": steps, "edges": list(edges_in)}
    graph = Graph.of(out)
    cycle = graph.find_cycle()
    if cycle:
        raise _bad("workflow graph has a cycle: " + " -> ".join(f'"{s}"' for s in cycle), "workflow.edges")
    return out


def _check_header(spec: Any) -> None:
    """The spec is an object with an id, a version >= 0 and, optionally, a string title."""
    if not isinstance(spec, dict):
        raise _bad("a workflow is a JSON object", "workflow")
    wid = spec.get("id")
    if not isinstance(wid, str) or not wid:
        raise _bad("workflow id must be a non-empty string", "workflow.id")
    version = spec.get("version")
    if type(version) is not int or version < 0:
        raise _bad("workflow version must be an integer >= 0", "workflow.version")
    if "title" in spec and not isinstance(spec["title"], str):
        raise _bad("workflow title must be a string", "workflow.title")


def _normalize_step(step: Any, where: str, seen: set[str]) -> dict[str, Any]:
    """One step, checked (its id joins ``seen``) and with its defaults filled in."""
    if not isinstance(step, dict):
        raise _bad("a step is a JSON object", where)
    sid = step.get("id")
    if not isinstance(sid, str) or not sid:
        raise _bad("step id must be a non-empty string", f"{where}.id")
    if sid in seen:
        raise _bad(f'duplicate step id "{sid}"', f"{where}.id")
    seen.add(sid)
    policy = step.get("gatePolicy", "AUTO")
    if policy not in GATE_POLICIES:
        raise _bad(f"gatePolicy must be one of {', '.join(GATE_POLICIES)}", f"{where}.gatePolicy")
    for key in ("title", "description"):
        if key in step and not isinstance(step[key], str):
            raise _bad(f"step {key} must be a string", f"{where}.{key}")
    for key in ("inputs", "outputs"):
        value = step.get(key, [])
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise _bad(f"step {key} must be a list of strings", f"{where}.{key}")
    return {
        **step,
        "gatePolicy": policy,
        "inputs": step.get("inputs", []),
        "outputs": step.get("outputs", []),
    }


def _check_edge(edge: Any, where: str, edge_ids: set[str], step_ids: set[str]) -> None:
    """One edge between known steps, not a self edge, with a new id (it joins ``edge_ids``)."""
    if not isinstance(edge, dict):
        raise _bad("an edge is a JSON object", where)
    for key in ("id", "from", "to"):
        if not isinstance(edge.get(key), str) or not edge[key]:
            raise _bad(f"edge {key} must be a non-empty string", f"{where}.{key}")
    if edge["id"] in edge_ids:
        raise _bad(f'duplicate edge id "{edge["id"]}"', f"{where}.id")
    edge_ids.add(edge["id"])
    for key in ("from", "to"):
        if edge[key] not in step_ids:
            raise _bad(f'edge "{edge["id"]}" references unknown step "{edge[key]}"', f"{where}.{key}")
    if edge["from"] == edge["to"]:
        raise _bad(f'edge "{edge["id"]}" connects step "{edge["from"]}" to itself', where)


@dataclass(frozen=True, slots=True)
class Graph:
    """Adjacency of a workflow: step order, predecessors and successors (edge order kept)."""

    order: tuple[str, ...]
    predecessors: dict[str, tuple[str, ...]]
    successors: dict[str, tuple[str, ...]]

    @classmethod
    def of(cls, spec: dict[str, Any]) -> Graph:
        order = tuple(s["id"] for s in spec.get("steps", []) if isinstance(s, dict) and "id" in s)
        preds: dict[str, list[str]] = {s: [] for s in order}
        succs: dict[str, list[str]] = {s: [] for s in order}
        for edge in spec.get("edges", []) or []:
            a, b = edge.get("from"), edge.get("to")
            if a in succs and b in preds:
                if a not in preds[b]:
                    preds[b].append(a)
                if b not in succs[a]:
                    succs[a].append(b)
        return cls(order, {k: tuple(v) for k, v in preds.items()}, {k: tuple(v) for k, v in succs.items()})

    def descendants(self, step_id: str) -> frozenset[str]:
        """Every step reachable from ``step_id`` along the edges (``step_id`` itself excluded)."""
        seen: set[str] = set()
        todo = list(self.successors.get(step_id, ()))
        while todo:
            nxt = todo.pop()
            if nxt not in seen:
                seen.add(nxt)
                todo.extend(self.successors.get(nxt, ()))
        seen.discard(step_id)
        return frozenset(seen)

    def find_cycle(self) -> list[str]:
        """A cycle as a list of step ids (first repeated at the end), or ``[]`` for a DAG."""
        WHITE, GREY, BLACK = 0, 1, 2
        color = dict.fromkeys(self.order, WHITE)
        for root in self.order:
            if color[root] != WHITE:
                continue
            stack: list[tuple[str, int]] = [(root, 0)]
            path: list[str] = [root]
            color[root] = GREY
            while stack:
                node, idx = stack[-1]
                nexts = self.successors[node]
                if idx < len(nexts):
                    stack[-1] = (node, idx + 1)
                    nxt = nexts[idx]
                    if color[nxt] == GREY:
                        return path[path.index(nxt) :] + [nxt]
                    if color[nxt] == WHITE:
                        color[nxt] = GREY
                        stack.append((nxt, 0))
                        path.append(nxt)
                else:
                    color[node] = BLACK
                    stack.pop()
                    path.pop()
        return []
