"""Live status under load: 100 websocket subscribers on one run, a writer appending 100 events/s for 10 s.

Profiles (each with real daphne processes on loopback, started and stopped here):
- embedded: one daphne, SQLite, in-memory channel layer;
- scaled:   two daphne processes, PostgreSQL (a dedicated database, dropped after), Redis layer;
            the subscribers are split between the two servers;
- scaled4:  the same with four daphne processes.

Writer (LIVE_BENCH_WRITER): "inproc" (default) appends `tool_call` events one commit each through
the session API (runs.execution.session), paced to the rate, and records the time each commit returned:
inside server 0 in the embedded profile (the in-memory layer only reaches sockets of its own
process), in a writer process of its own in the scaled profile (bench/live_server.py); "rest" posts them to `POST /api/runs/{id}/events` of server 0 (then
the commit lies between request and response; "commit -> receipt" is measured from the response,
clamped at 0, and "request -> receipt" is printed too). Each subscriber behaves like
static/workbench/live.js: connects with ?last_seq, checks that updates are contiguous, acks them,
and reconnects with its seq when dropped.

Figures: the fraction of (subscriber, event) pairs shown, the fraction of events every subscriber
shows (target 100%), commit -> receipt latency p50/p99 over all (subscriber, event) pairs (target
p99 < 250 ms), and the servers' /live/metrics counters.

The in-process writer first appends LIVE_BENCH_WARMUP (20) events and pauses 1 s: fresh server
processes compile templates and open connections on their first updates; those events must still
reach every subscriber but are left out of the figures.

Fan-out: "DB reads per commit batch" is the servers' `batch_reads` (a run hub reading a committed
batch: once per process however many sockets it serves) over the writer's commits; `catchup_reads`
are reads for sockets out of step (reconnects).

Failover (LIVE_BENCH_KILL=1, multi-server profiles): halfway through the writes the last server
is killed (SIGKILL); each of its subscribers reconnects to the next server with its last seq and
must see every row exactly once (client-seen gaps 0, 100% delivered).

The issue-29 target run: LIVE_BENCH_PROFILES=scaled4 LIVE_BENCH_SUBSCRIBERS=1000 LIVE_BENCH_RATE=10
LIVE_BENCH_BATCH=10 LIVE_BENCH_KILL=1 (10 commits/s x 10 events).

Env: LIVE_BENCH_SUBSCRIBERS (100), LIVE_BENCH_RATE (commits/s, 100), LIVE_BENCH_BATCH (events per
commit, 1), LIVE_BENCH_SECONDS (10), LIVE_BENCH_KILL (0),
LIVE_BENCH_PROFILES (embedded,scaled,scaled4), LIVE_BENCH_REDIS_DB (12), LIVE_BENCH_WRITER (inproc|rest), LIVE_BENCH_WARMUP (20),
LIVE_BENCH_TIMELINE (print the worst latency per 100 events), LIVE_BENCH_TAIL_SECONDS (15: how long
subscribers may take to show the last commit), LIVE_BENCH_CLIENT (node|python: node, bench/live_client.mjs
with the `ws` package npm-installed into var/bench/node, when node is on PATH), LIVE_BENCH_CLIENT_PROCS (1).

CPU: the servers' CPU (utime+stime from /proc) while the writer writes and the client's, each over the
updates sent: the per-update cost that decides how many sockets 2 cores carry (wall-clock latency on
a machine shared with other work is mostly waiting for a core).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import httpx  # noqa: E402
import orjson  # noqa: E402

from bench.live_server import tool_event  # noqa: E402
from tests.conftest import LINEAR_WORKFLOW  # noqa: E402
from tests.live.cluster import ORIGIN, Cluster  # noqa: E402

SUBSCRIBERS = int(os.environ.get("LIVE_BENCH_SUBSCRIBERS", "100"))
RATE = float(os.environ.get("LIVE_BENCH_RATE", "100"))
SECONDS = float(os.environ.get("LIVE_BENCH_SECONDS", "10"))
BATCH = int(os.environ.get("LIVE_BENCH_BATCH", "1"))  # events per commit
KILL = os.environ.get("LIVE_BENCH_KILL", "0") == "1"  # kill the last server halfway
PROFILES = [
    p.strip()
    for p in os.environ.get("LIVE_BENCH_PROFILES", "embedded,scaled,scaled4").split(",")
    if p.strip()
]
WRITER = os.environ.get("LIVE_BENCH_WRITER", "inproc")
WARMUP = int(os.environ.get("LIVE_BENCH_WARMUP", "20"))  # events before the measured ones (inproc writer)
CONNECT_SECONDS = float(os.environ.get("LIVE_BENCH_CONNECT_SECONDS", "300"))  # all subscribers connected
CONNECT_WAVE = int(os.environ.get("LIVE_BENCH_CONNECT_WAVE", "100"))  # subscribers connecting at once
REDIS_DB = int(os.environ.get("LIVE_BENCH_REDIS_DB", "12"))  # flushed before and after
TAIL = float(os.environ.get("LIVE_BENCH_TAIL_SECONDS", "15"))  # after the last commit: every sub shows it
CLIENT = os.environ.get("LIVE_BENCH_CLIENT", "node" if shutil.which("node") else "python")
CLIENT_PROCS = int(os.environ.get("LIVE_BENCH_CLIENT_PROCS", "1"))  # node client processes
ACK_EVERY, ACK_MS = 4, 300  # as static/workbench/live.js acks
NODE_DIR = ROOT / "var" / "bench" / "node"  # the `ws` package, installed here by ensure_node_client
LAUNCHER = ROOT / "bench" / "live_server.py"
SEQ_RE = re.compile(r'data-seq="(\d+)"')


class Subscriber:
    def __init__(self, urls: list[str], cookie: str, verify: bool = True) -> None:
        self.urls = urls  # its own server first; the next ones when that one is gone
        self.url_index = 0
        self.verify = verify  # check the rows' seqs inside the HTML (else trust from/last: cheaper)
        self.cookie = cookie
        self.last_seq = 0
        self.received: dict[int, float] = {}
        self.sent: dict[int, float] = {}  # server time the row left (update "sent_at")
        self.reconnects = 0
        self.gaps = 0
        self.bytes = 0
        self.unacked = 0
        self.ack_timer: asyncio.TimerHandle | None = None
        self.connected = asyncio.Event()
        self.done = False

    async def ack(self, ws) -> None:
        if self.ack_timer is not None:
            self.ack_timer.cancel()
            self.ack_timer = None
        self.unacked = 0
        try:
            await ws.send(json.dumps({"type": "ack", "seq": self.last_seq}))
        except Exception:
            pass

    async def run(self) -> None:
        from websockets.asyncio.client import connect
        from websockets.exceptions import ConnectionClosed

        while not self.done:
            try:
                async with connect(
                    f"{self.urls[self.url_index]}?last_seq={self.last_seq}",
                    origin=ORIGIN,
                    additional_headers={"Cookie": self.cookie},
                    max_size=None,
                    open_timeout=30,
                ) as ws:
                    async for raw in ws:
                        now = time.time()
                        self.bytes += len(raw)
                        message = orjson.loads(raw)
                        if message["type"] == "hello":
                            if message["from_seq"] != self.last_seq:
                                self.gaps += 1
                            self.connected.set()
                        elif message["type"] == "update":
                            if message["from_seq"] != self.last_seq:
                                self.gaps += 1
                                await ws.send(json.dumps({"type": "resync", "after_seq": self.last_seq}))
                                continue
                            if self.verify:
                                seqs = [int(seq) for seq in SEQ_RE.findall(message["html"])]
                                if seqs != list(range(message["from_seq"] + 1, message["last_seq"] + 1)):
                                    self.gaps += 1
                            else:
                                seqs = range(message["from_seq"] + 1, message["last_seq"] + 1)
                            for seq in seqs:
                                self.received.setdefault(seq, now)
                                self.sent.setdefault(seq, message["sent_at"])
                            self.last_seq = message["last_seq"]
                            self.unacked += 1
                            if self.unacked >= 4:  # cumulative acks, as live.js sends them
                                await self.ack(ws)
                            elif self.ack_timer is None:
                                self.ack_timer = asyncio.get_running_loop().call_later(
                                    0.3, lambda ws=ws: asyncio.ensure_future(self.ack(ws))
                                )
                        if self.done:
                            return
            except (ConnectionClosed, TimeoutError):
                pass
            except OSError:  # refused: its server is gone, try the next one
                self.url_index = (self.url_index + 1) % len(self.urls)
            if not self.done:
                self.reconnects += 1
                await asyncio.sleep(0.05)


def ensure_node_client() -> None:
    """npm-install `ws` into var/bench/node once (not committed; the bench brings what it needs)."""
    if (NODE_DIR / "node_modules" / "ws" / "package.json").exists():
        return
    NODE_DIR.mkdir(parents=True, exist_ok=True)
    if not (NODE_DIR / "package.json").exists():
        (NODE_DIR / "package.json").write_text('{"private": true}\n')
    subprocess.run(["npm", "install", "--no-audit", "--no-fund", "ws@8"], cwd=NODE_DIR, check=True)


class NodeClients:
    """The subscribers in `CLIENT_PROCS` Node.js processes (bench/live_client.mjs, the `ws` package):
    cheap enough per message that 1,000 sockets do not compete with the servers for the 2 cores
    (a Python websockets client spent more CPU per message than the servers did)."""

    def __init__(self, specs: list[dict], cookie: str, tmp: Path) -> None:
        self.procs: list[asyncio.subprocess.Process] = []
        self.outs: list[Path] = []
        self.specs = specs
        self.cookie = cookie
        self.tmp = tmp
        self.connect_seconds = 0.0

    async def start(self) -> None:
        ensure_node_client()
        env = dict(os.environ, LIVE_CLIENT_NODE_MODULES=str(NODE_DIR / "node_modules"))
        chunks = [self.specs[i::CLIENT_PROCS] for i in range(CLIENT_PROCS)]
        for i, chunk in enumerate(chunks):
            out = self.tmp / f"client-{i}.json"
            config = self.tmp / f"client-{i}-config.json"
            config.write_text(
                json.dumps(
                    {
                        "subs": chunk,
                        "cookie": self.cookie,
                        "origin": ORIGIN,
                        "wave": max(1, CONNECT_WAVE // CLIENT_PROCS),
                        "ackEvery": ACK_EVERY,
                        "ackMs": ACK_MS,
                        "out": str(out),
                    }
                )
            )
            proc = await asyncio.create_subprocess_exec(
                "node",
                str(ROOT / "bench" / "live_client.mjs"),
                str(config),
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                env=env,
            )
            self.procs.append(proc)
            self.outs.append(out)
        started = time.monotonic()
        for proc in self.procs:
            line = await asyncio.wait_for(proc.stdout.readline(), CONNECT_SECONDS)
            if not line.startswith(b"connected"):
                raise RuntimeError(f"node client: {line!r}")
        self.connect_seconds = time.monotonic() - started

    async def finish(self, last: int, seconds: float) -> tuple[list, float]:
        for proc in self.procs:
            proc.stdin.write(f"wait {last} {seconds}\n".encode())
            await proc.stdin.drain()
        for proc in self.procs:
            await proc.stdout.readline()
            await proc.wait()
        subs, cpu = [], 0.0
        for out, chunk in zip(
            self.outs, [self.specs[i::CLIENT_PROCS] for i in range(CLIENT_PROCS)], strict=True
        ):
            data = json.loads(out.read_text())
            cpu += data["cpu_seconds"]
            for spec, raw in zip(chunk, data["subs"], strict=True):
                sub = Subscriber(spec["urls"], self.cookie, spec["verify"])
                sub.reconnects, sub.gaps, sub.bytes = raw["reconnects"], raw["gaps"], raw["bytes"]
                sub.url_index, sub.last_seq = raw["url_index"], raw["last_seq"]
                for first, last_seq, received, sent_at in raw["updates"]:
                    for seq in range(first + 1, last_seq + 1):
                        sub.received.setdefault(seq, received)
                        sub.sent.setdefault(seq, sent_at)
                subs.append((spec["order"], sub))
        return [sub for _, sub in sorted(subs, key=lambda pair: pair[0])], cpu


def cpu_seconds(pid: int) -> float:
    """utime + stime of a process (Linux /proc), in seconds."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def inproc_writer(cluster: Cluster, seed: dict, total: int) -> tuple[dict, int, float]:
    """The writer thread inside server 0 (bench/live_server.py), or with Redis a writer process of
    its own: exact commit times either way."""
    control = cluster.control_dir(0)
    proc = None
    if cluster.redis_url:
        control = cluster.tmp / "control-writer"
        proc = await asyncio.create_subprocess_exec(
            sys.executable, str(LAUNCHER), "write", str(control), cwd=ROOT, env=cluster.env()
        )
        await asyncio.sleep(0.5)
    control.mkdir(parents=True, exist_ok=True)
    spec = {
        "workspace": "acme",
        "run_id": seed["run_id"],
        "events": total,
        "rate": RATE,
        "warmup": WARMUP,
        "batch": BATCH,
    }
    (control / "start.json").write_text(json.dumps(spec))
    done = control / "commits.json"
    deadline = time.monotonic() + SECONDS * 10 + 60
    while not done.exists():
        if time.monotonic() > deadline:
            raise RuntimeError("the in-process writer did not finish")
        await asyncio.sleep(0.1)
    out = json.loads(done.read_text())
    if proc is not None:
        await proc.wait()
    commits = {int(seq): (at, at) for seq, at in out["commits"].items() if int(seq) >= out["first_measured"]}
    return commits, out["failures"], out["seconds"]


async def server_counters(cluster: Cluster, seed: dict, indexes) -> dict[str, int]:
    counters: dict[str, int] = {}
    async with httpx.AsyncClient(timeout=10, cookies={"sessionid": seed["sessions"]["alice"]}) as http:
        for i in indexes:
            try:
                response = await http.get(cluster.url(i, "/live/metrics"))
            except httpx.HTTPError:
                continue
            if response.status_code == 200:
                for key, value in response.json()["counters"].items():
                    counters[key] = counters.get(key, 0) + value
    return counters


async def kill_halfway(cluster: Cluster, seed: dict, index: int, killed: dict) -> None:
    """SIGKILL server `index` halfway through the writes; its counters are read just before."""
    await asyncio.sleep(1.0 + SECONDS / 2)  # the writer's warm-up pause, then half the writes
    killed["counters"] = await server_counters(cluster, seed, [index])
    cluster.procs[index].kill()
    killed["at"] = time.time()


async def rest_writer(cluster: Cluster, run_id: str, token: str, total: int) -> tuple[dict, int, float]:
    commits: dict[int, tuple[float, float]] = {}
    failures = 0
    limit = asyncio.Semaphore(16)

    async def write(http: httpx.AsyncClient, i: int) -> None:
        nonlocal failures
        async with limit:
            started = time.time()
            try:
                response = await http.post(
                    cluster.url(0, f"/api/runs/{run_id}/events"),
                    json={"events": [tool_event(run_id, i * BATCH + j) for j in range(BATCH)]},
                    headers={"Authorization": f"Bearer {token}"},
                )
            except httpx.HTTPError:
                failures += 1
                return
            finished = time.time()
            if response.status_code != 200:
                failures += 1
                return
            for seq in response.json()["seqs"]:
                commits[seq] = (started, finished)

    t0 = time.monotonic()
    async with httpx.AsyncClient(timeout=30, limits=httpx.Limits(max_connections=16)) as http:
        writes = []
        for i in range(total):
            delay = t0 + i / RATE - time.monotonic()
            if delay > 0:
                await asyncio.sleep(delay)
            writes.append(asyncio.create_task(write(http, i)))
        await asyncio.gather(*writes)
    return commits, failures, time.monotonic() - t0


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    values = sorted(values)
    return values[min(len(values) - 1, round(q * (len(values) - 1)))]


async def scenario(cluster: Cluster, seed: dict) -> dict:
    run_id, token = seed["run_id"], seed["token"]
    cookie = f"sessionid={seed['sessions']['alice']}"
    n = len(cluster.ports)
    specs = [
        {
            "order": i,
            "urls": [cluster.ws_url((i + k) % n, f"/ws/runs/{run_id}/") for k in range(n)],
            "verify": i % 20 == 0,  # every 20th checks the rows in the HTML; the others trust the range
        }
        for i in range(SUBSCRIBERS)
    ]
    tasks = []
    node = None
    connect_started = time.monotonic()
    if CLIENT == "node":
        node = NodeClients(specs, cookie, cluster.tmp)
        cluster.node_clients = node  # killed with the cluster if the scenario fails
        await node.start()
        subs: list[Subscriber] = []
    else:
        subs = [Subscriber(spec["urls"], cookie, verify=spec["verify"]) for spec in specs]
        connect_by = time.monotonic() + CONNECT_SECONDS
        for start in range(0, len(subs), CONNECT_WAVE):  # in waves: a handshake storm only times out
            wave = subs[start : start + CONNECT_WAVE]
            tasks += [asyncio.create_task(s.run()) for s in wave]
            await asyncio.wait_for(
                asyncio.gather(*(s.connected.wait() for s in wave)), max(1.0, connect_by - time.monotonic())
            )
    connect_seconds = time.monotonic() - connect_started
    server_cpu_connected = [cpu_seconds(p.pid) for p in cluster.procs]
    client_cpu_start = time.process_time()

    total = int(RATE * SECONDS)
    killed: dict = {}
    victim = n - 1 if KILL and n > 1 else None
    killer = asyncio.create_task(kill_halfway(cluster, seed, victim, killed)) if victim is not None else None
    if WRITER == "rest":
        commits, failures, write_seconds = await rest_writer(cluster, run_id, token, total)
    else:
        commits, failures, write_seconds = await inproc_writer(cluster, seed, total)
    if killer is not None:
        await killer
    last = max(commits) if commits else 0
    server_cpu = sum(
        cpu_seconds(p.pid) - before
        for p, before in zip(cluster.procs, server_cpu_connected, strict=True)
        if p.poll() is None
    )
    if os.environ.get("LIVE_SERVER_PROFILE"):  # bench/live_server.py dumps its profile
        for proc in cluster.procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGUSR2)
    if node is not None:
        subs, client_cpu = await node.finish(last, TAIL)
    else:
        deadline = time.monotonic() + TAIL
        # the clients' sequence numbers move in other tasks; a 0.1 s look costs nothing measured
        while time.monotonic() < deadline and any(s.last_seq < last for s in subs):  # noqa: ASYNC110
            await asyncio.sleep(0.1)
        client_cpu = time.process_time() - client_cpu_start
        for s in subs:
            s.done = True
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    seqs = sorted(commits)
    pairs = sum(1 for s in subs for seq in seqs if seq in s.received)
    everyone = sum(1 for seq in seqs if all(seq in s.received for s in subs))
    after_commit, after_request, server_side, client_side = [], [], [], []
    stayed = []  # commit -> receipt of the subscribers whose server lived (a kill's reconnects aside)
    for s in subs:
        for seq in seqs:
            if seq in s.received:
                started, finished = commits[seq]
                after_commit.append(max(0.0, s.received[seq] - finished) * 1000)
                if s.url_index == 0:
                    stayed.append(after_commit[-1])
                after_request.append((s.received[seq] - started) * 1000)
                server_side.append((s.sent[seq] - finished) * 1000)
                client_side.append((s.received[seq] - s.sent[seq]) * 1000)
    if os.environ.get("LIVE_BENCH_TIMELINE"):  # worst latency per 100 events, to see where the tail is
        worst = {}
        for s_ in subs:
            for seq in seqs:
                if seq in s_.received:
                    lat = (s_.received[seq] - commits[seq][1]) * 1000
                    worst[seq // 100] = max(worst.get(seq // 100, 0), lat)
        print("  worst per 100 events: " + " ".join(f"{v:.0f}" for _, v in sorted(worst.items())))
    counters = await server_counters(cluster, seed, [i for i in range(n) if i != victim])
    for key, value in killed.get("counters", {}).items():
        counters[key] = counters.get(key, 0) + value
    keys = (
        "broadcasts",
        "coalesced",
        "batch_reads",
        "catchup_reads",
        "renders",
        "updates_sent",
        "shared_sends",
        "prepared_sends",
        "hub_broadcasts",
        "broadcast_sends",
        "sender_wakeups",
        "frame_acks",
        "direct_writes",
        "buffered_writes",
        "hub_merges",
        "drain_waits",
        "lagged_deliveries",
        "drops",
        "resyncs",
        "gaps",
    )
    all_commits = total + (WARMUP if WRITER != "rest" else 0)  # the measured commits + warm-up ones
    return {
        "events": len(seqs),
        "write_failures": failures,
        "write_seconds": write_seconds,
        "shown_pairs": pairs / (len(seqs) * len(subs)) if seqs else 0.0,
        "shown_by_all": everyone / len(seqs) if seqs else 0.0,
        "p50_after_commit": percentile(after_commit, 0.5),
        "p99_after_commit": percentile(after_commit, 0.99),
        "p50_stayed": percentile(stayed, 0.5),
        "p99_stayed": percentile(stayed, 0.99),
        "p50_server": percentile(server_side, 0.5),
        "p99_server": percentile(server_side, 0.99),
        "p50_client": percentile(client_side, 0.5),
        "p99_client": percentile(client_side, 0.99),
        "p50_after_request": percentile(after_request, 0.5),
        "p99_after_request": percentile(after_request, 0.99),
        "client_reconnects": sum(s.reconnects for s in subs),
        "client_gaps": sum(s.gaps for s in subs),
        "megabytes": sum(s.bytes for s in subs) / 1e6,
        "server": {k: counters.get(k, 0) for k in keys},
        "commits": all_commits,
        "reads_per_commit": counters.get("batch_reads", 0) / all_commits if all_commits else 0.0,
        "killed": victim,
        "connect_seconds": connect_seconds,
        "server_cpu": server_cpu,
        "client_cpu": client_cpu,
        "messages": counters.get("updates_sent", 0),
        "moved": sum(1 for s in subs if s.url_index != 0),
    }


SERVERS = {"embedded": 1, "scaled": 2, "scaled4": 4}
LABELS = {
    "embedded": "1 daphne, SQLite, in-memory layer",
    "scaled": "2 daphne, PostgreSQL, Redis layer",
    "scaled4": "4 daphne, PostgreSQL, Redis layer",
}


def run_profile(name: str) -> dict:
    if name == "embedded":
        cluster = Cluster(database="sqlite", servers=1, launcher=LAUNCHER)
    elif name in ("scaled", "scaled4"):
        servers = 4 if name == "scaled4" else 2
        cluster = Cluster(database="postgres", redis_db=REDIS_DB, servers=servers, launcher=LAUNCHER)
    else:
        raise SystemExit(f"unknown profile {name!r}")
    with cluster:
        seed = cluster.seed(workflow=LINEAR_WORKFLOW, run_id="run_bench_live")
        try:
            return asyncio.run(scenario(cluster, seed))
        finally:
            node = getattr(cluster, "node_clients", None)
            for proc in node.procs if node is not None else ():
                if proc.returncode is None:
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(proc.pid, signal.SIGKILL)


def main() -> int:
    how = "REST appends to server 0" if WRITER == "rest" else "in-process appends"
    print(f"load: {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f} {os.getloadavg()[2]:.2f} (1/5/15 min)")
    print(
        f"live bench: {SUBSCRIBERS} subscribers on one run, writer {RATE:.0f} commits/s x {BATCH} events "
        f"for {SECONDS:.0f} s ({how}){', killing the last server halfway' if KILL else ''}"
    )
    ok = True
    for name in PROFILES:
        started = time.monotonic()
        r = run_profile(name)
        print(f"\n[{name}] {LABELS[name]}  ({time.monotonic() - started:.0f} s)")
        rate = r["events"] / r["write_seconds"] if r["write_seconds"] else 0
        print(
            f"  events committed       {r['events']} in {r['write_seconds']:.1f} s ({rate:.0f}/s, "
            f"{r['write_failures']} failed)"
        )
        print(f"  shown (sub x event)    {r['shown_pairs'] * 100:.2f} %")
        print(f"  shown by every sub     {r['shown_by_all'] * 100:.2f} %   (target 100 %)")
        print(
            f"  commit -> receipt      p50 {r['p50_after_commit']:.0f} ms  p99 {r['p99_after_commit']:.0f} ms"
            "   (target p99 < 250 ms)"
        )
        print(
            f"    of which commit -> sent  p50 {r['p50_server']:.0f} ms  p99 {r['p99_server']:.0f} ms;"
            f"  sent -> received  p50 {r['p50_client']:.0f} ms  p99 {r['p99_client']:.0f} ms"
        )
        if WRITER == "rest":
            print(
                f"  request -> receipt     p50 {r['p50_after_request']:.0f} ms  p99 {r['p99_after_request']:.0f} ms"
            )
        print(
            f"  client reconnects {r['client_reconnects']}, client-seen gaps {r['client_gaps']}, "
            f"{r['megabytes']:.1f} MB received"
        )
        print("  server counters " + ", ".join(f"{k} {v}" for k, v in r["server"].items()))
        print(
            f"  DB reads per commit batch {r['reads_per_commit']:.2f}   ({r['server']['batch_reads']} hub reads / "
            f"{r['commits']} commits; target <= {SERVERS.get(name, 1)} processes)"
        )
        if r["killed"] is not None:
            print(f"  killed server {r['killed']} halfway: {r['moved']} subscribers moved to another server")
            print(
                f"  commit -> receipt of the subscribers that stayed  p50 {r['p50_stayed']:.0f} ms"
                f"  p99 {r['p99_stayed']:.0f} ms"
            )
        per_message = 1e6 / r["messages"] if r["messages"] else float("nan")
        print(
            f"  connect {SUBSCRIBERS} subscribers {r['connect_seconds']:.1f} s ({CLIENT} client);  CPU while writing: "
            f"servers {r['server_cpu']:.1f} s ({r['server_cpu'] * per_message:.0f} us/update sent, "
            f"killed server's share missing), client {r['client_cpu']:.1f} s "
            f"({r['client_cpu'] * per_message:.0f} us/update)"
        )
        ok = ok and r["shown_by_all"] == 1.0 and r["p99_after_commit"] < 250
    print(f"\nlive bench: {'targets met' if ok else 'targets NOT met'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
