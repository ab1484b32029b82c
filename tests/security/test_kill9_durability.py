"""kill -9 mid-ingest: a real daphne process, clients appending event batches with
Idempotency-Keys, SIGKILL while requests are in flight, a restart, and a retry of every request
that was not acknowledged. Afterwards:

* every acknowledged event is stored (with the seqs its acknowledgement gave);
* the run's seqs are 1..N without a gap;
* every batch landed exactly once: no event id twice, N = all events sent;
* a retry of a batch that had committed before the kill is answered from the stored response.

The database is the profile's own: SQLite (WAL) under ``make test-sqlite``, PostgreSQL under
``make test-postgres`` (the other variant skips), so both are covered by ``make test``.
It lives in the suite, not in bench/: it asserts a property (no lost or doubled write), not a speed.
"""

from __future__ import annotations

import json
import os
import signal
import threading
import uuid

import httpx
import pytest
from workbench_sdk.client import make_event

from tests.conftest import LINEAR_WORKFLOW
from tests.live.cluster import Cluster

BATCH = 10  # events per request
CLIENTS = 4  # concurrent senders: several requests are in flight when the server dies
ACKS_BEFORE_KILL = 12  # acknowledged requests per round before the SIGKILL
ROUNDS = 2  # kill, restart, retry; twice
RUN_ID = "run_kill9"


def _profile() -> str:
    return "postgres" if os.environ.get("DATABASE_URL", "").startswith("postgres") else "sqlite"


class Ingest:
    """Senders appending batches until told to stop; what was acknowledged, what was not."""

    def __init__(self, url: str, token: str) -> None:
        self.url = url
        self.token = token
        self.lock = threading.Lock()
        self.acked: dict[str, list[int]] = {}  # idempotency key -> seqs acknowledged
        self.pending: dict[str, bytes] = {}  # key -> body, sent but not acknowledged (yet)
        self.bodies: dict[str, bytes] = {}
        self.event_ids: dict[str, list[str]] = {}
        self.ack_count = 0
        self.stop = threading.Event()
        self.errors: list[str] = []
        self.retried = 0

    def new_batch(self) -> tuple[str, bytes]:
        key = f"k-{uuid.uuid4().hex}"
        events = [make_event(RUN_ID, "annotation", text=f"{key} {i}") for i in range(BATCH)]
        body = json.dumps({"events": events}).encode()
        with self.lock:
            self.bodies[key] = body
            self.event_ids[key] = [e["id"] for e in events]
            self.pending[key] = body
        return key, body

    def post(self, http: httpx.Client, key: str, body: bytes) -> httpx.Response:
        return http.post(
            f"{self.url}/api/runs/{RUN_ID}/events",
            content=body,
            headers={
                "Authorization": f"Bearer {self.token}",
                "Idempotency-Key": key,
                "Content-Type": "application/json",
            },
        )

    def acknowledge(self, key: str, response: httpx.Response) -> None:
        if response.status_code != 200:
            self.errors.append(f"{key}: {response.status_code} {response.text[:200]}")
            return
        with self.lock:
            self.acked[key] = response.json()["seqs"]
            self.pending.pop(key, None)
            self.ack_count += 1

    def sender(self) -> None:
        with httpx.Client(timeout=30) as http:
            while not self.stop.is_set():
                key, body = self.new_batch()
                try:
                    response = self.post(http, key, body)
                except httpx.HTTPError:
                    return  # the server died under this request: it stays pending
                self.acknowledge(key, response)


def _run_round(cluster: Cluster, ingest: Ingest, round_no: int) -> dict[str, list[int]]:
    """Send until enough acks, SIGKILL the server, restart it, retry what was pending."""
    target = ingest.ack_count + ACKS_BEFORE_KILL
    threads = [threading.Thread(target=ingest.sender, daemon=True) for _ in range(CLIENTS)]
    for thread in threads:
        thread.start()
    while ingest.ack_count < target and not ingest.errors and all(t.is_alive() for t in threads):
        threading.Event().wait(0.01)
    proc = cluster.procs[0]
    os.kill(proc.pid, signal.SIGKILL)  # no handler runs: as a crash or the OOM killer
    proc.wait(timeout=10)
    ingest.stop.set()
    for thread in threads:
        thread.join(timeout=60)
    assert not ingest.errors, ingest.errors
    ingest.stop.clear()
    cluster.start_server(0, cluster.ports[0])
    # Each sender puts its batch in `pending` before sending it and takes it out on the ack, so the
    # requests the kill interrupted (or that never reached the server) are all here.
    assert ingest.pending, "no request was in flight at the kill"
    ingest.retried += len(ingest.pending)
    replays: dict[str, list[int]] = {}
    with httpx.Client(timeout=30) as http:
        for key, body in sorted(ingest.pending.items()):
            response = ingest.post(http, key, body)
            assert response.status_code == 200, (round_no, key, response.status_code, response.text)
            if response.headers.get("Idempotent-Replayed") == "true":
                replays[key] = response.json()["seqs"]
            ingest.acknowledge(key, response)
    assert not ingest.pending
    return replays


@pytest.mark.parametrize("database", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def test_kill_9_mid_ingest_loses_nothing_and_doubles_nothing(database):
    if database != _profile():
        pytest.skip(f"runs under the {database} profile (make test runs both)")
    env = {
        "WORKBENCH_RATE_LIMIT_WORKSPACE_PER_MINUTE": "1000000",
        "WORKBENCH_RATE_LIMIT_PER_MINUTE": "1000000",
    }
    with Cluster(database=database, servers=1, extra_env=env) as cluster:
        seed = cluster.seed(workflow=LINEAR_WORKFLOW, run_id=RUN_ID)
        ingest = Ingest(cluster.url(0, ""), seed["token"])
        replayed: dict[str, list[int]] = {}
        for round_no in range(ROUNDS):
            replayed.update(_run_round(cluster, ingest, round_no))
        stored = json.loads(
            cluster.python(
                "import json\n"
                "from runs.models import Event, Run\n"
                f"run = Run.objects.get(run_id={RUN_ID!r})\n"
                "rows = list(Event.objects.filter(run=run).order_by('seq').values_list('seq', 'event_id'))\n"
                "print(json.dumps({'rows': rows, 'last_seq': run.last_seq}))\n"
            )
        )
    rows = stored["rows"]
    seqs = [seq for seq, _ in rows]
    by_seq = dict(rows)
    assert seqs == list(range(1, len(rows) + 1)), "seqs have a gap or repeat"
    assert stored["last_seq"] == len(rows)
    ids = [event_id for _, event_id in rows]
    assert len(ids) == len(set(ids)), "an event id landed twice"
    sent = {event_id for key in ingest.bodies for event_id in ingest.event_ids[key]}
    # The start of the run wrote its own events; every batch sent landed exactly once.
    assert sent <= set(ids) and len(ids) - len(sent) == len(set(ids) - sent)
    for key, acked_seqs in ingest.acked.items():
        assert [by_seq.get(seq) for seq in acked_seqs] == ingest.event_ids[key], (
            f"acknowledged batch {key} lost"
        )
    for key, seqs in replayed.items():  # committed before the kill, answered from the stored response
        assert ingest.acked[key] == seqs
    print(
        f"{database}: {len(rows)} events, {len(ingest.acked)} batches, {ingest.retried} retried, {len(replayed)} replayed"
    )
