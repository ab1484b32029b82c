"""Replays from the response cache, and pruning expired replay data.

1. A recorded run of N model calls (a registered program calling the real Anthropic SDK against
   the loopback fake, through the provider layer and the one write path), then a replay of it
   by the worker: wall time of the recording and of the replay, provider requests each made
   (the fake counts them), the determinism score. The replay's calls are answered from the cache.
2. ``responsecache.prune`` of E expired cached answers spread over 4 workspaces (beside as many
   fresh ones that stay), and the median time of a cache lookup with the retention filter.

Environment: BENCH_REPLAY_CALLS (default 50), BENCH_REPLAY_EXPIRED (default 20000),
BENCH_PAGES_DB (as bench_pages: a temporary SQLite file unless a postgres:// URL is given).
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from datetime import timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

os.environ["WORKBENCH_TASKS_BACKEND"] = "dummy"  # the bench runs the forks' work itself
import bench_pages  # noqa: E402,F401  (sets up Django on its own temporary database)
from django.conf import settings  # noqa: E402
from django.core.management import call_command  # noqa: E402
from django.utils import timezone  # noqa: E402

from runs.actions import responsecache
from runs.actions.forks import determinism_report, do_fork_with_history  # noqa: E402
from runs.actions.workspaces import get_or_create_workspace  # noqa: E402
from runs.engine import programs
from runs.execution.host import Workbench  # noqa: E402
from runs.execution.replay import run_fork  # noqa: E402
from runs.models import CachedResponse, Workspace  # noqa: E402
from runs.providers.base import ProviderSettings  # noqa: E402
from tests.fakes.anthropic_api import FakeAnthropic  # noqa: E402

CALLS = int(os.environ.get("BENCH_REPLAY_CALLS", "50"))
EXPIRED = int(os.environ.get("BENCH_REPLAY_EXPIRED", "20000"))
WORKFLOW = {"id": "bench-replay", "version": 1, "steps": [{"id": "ask"}], "edges": []}


def replay_from_cache(fake: FakeAnthropic) -> None:
    provider = ProviderSettings(
        kind="anthropic",
        api_key="test-anthropic-key",
        base_url=fake.url,
        max_retries=0,
        egress_allow=("127.0.0.0/8",),
    )

    def program(s) -> None:
        s.begin_step("ask")
        for i in range(CALLS):
            request = {
                "model": "claude-haiku-4-5",
                "max_tokens": 32,
                "messages": [{"role": "user", "content": f"q{i}"}],
            }
            s.model_call(provider, request, step_id="ask", correlation_id=f"c{i}")
        s.complete_step("ask")
        s.complete()

    programs.register(WORKFLOW["id"], program)
    workspace = get_or_create_workspace("bench-replay")
    wb = Workbench(workspace=workspace, actor="bench")
    t0 = time.perf_counter()
    source = wb.run_workflow(workflow=WORKFLOW).run
    recorded_ms = (time.perf_counter() - t0) * 1000
    recorded_requests = len(fake.requests)
    t0 = time.perf_counter()
    fork = run_fork(do_fork_with_history(workspace=workspace, source_run_id=source.run_id, mode="replay").pk)
    replay_ms = (time.perf_counter() - t0) * 1000
    report = determinism_report(fork)
    print(
        f"replay of {CALLS} model calls ({source.last_seq} events): recorded {recorded_ms:.0f} ms "
        f"({recorded_requests} provider requests), replayed {replay_ms:.0f} ms "
        f"({len(fake.requests) - recorded_requests} provider requests, {report['cacheHits']} cache hits), "
        f"score {report['score']}"
    )


def prune_expired() -> None:
    spaces = [get_or_create_workspace(f"bench-prune-{i}") for i in range(4)]
    old = timezone.now() - timedelta(days=settings.WORKBENCH_REPLAY_CACHE_DAYS + 1)
    rows = []
    for n in range(EXPIRED * 2):
        key = f"{n:064x}"
        rows.append(
            CachedResponse(
                workspace=spaces[n % 4],
                key=key,
                key_v1=key,
                provider="anthropic",
                model="m",
                request="{}",
                response='{"response": {}, "chunks": []}',
                response_digest=key,
            )
        )
    CachedResponse.objects.bulk_create(rows, batch_size=2000)
    expired_keys = [f"{n:064x}" for n in range(EXPIRED * 2) if n % 8 < 4]  # half of each workspace's
    for start in range(0, len(expired_keys), 5000):
        batch = expired_keys[start : start + 5000]
        CachedResponse.objects.filter(workspace__in=spaces, key__in=batch).update(created_at=old)
    timings = []
    for n in [n for n in range(800) if n % 8 >= 4]:  # fresh keys: found through the retention filter
        t0 = time.perf_counter()
        assert responsecache.lookup(spaces[n % 4], f"{n:064x}") is not None
        timings.append((time.perf_counter() - t0) * 1000)
    t0 = time.perf_counter()
    deleted = responsecache.prune()
    prune_ms = (time.perf_counter() - t0) * 1000
    left = CachedResponse.objects.filter(workspace__in=spaces).count()
    print(
        f"prune: {sum(deleted.values())} expired answers in {len(deleted)} workspaces deleted in {prune_ms:.0f} ms "
        f"({left} fresh kept); lookup with the retention filter: median {statistics.median(timings):.2f} ms"
    )


def main() -> int:
    call_command("migrate", verbosity=0)
    settings.WORKBENCH_EGRESS_ALLOW = ["127.0.0.0/8"]
    with FakeAnthropic() as fake:
        replay_from_cache(fake)
    prune_expired()
    Workspace.objects.filter(slug__startswith="bench-").delete()
    return 0


if __name__ == "__main__":
    sys.exit(main())
