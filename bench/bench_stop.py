"""Stop before the first byte: how long a provider call takes to end once Stop is set, through the
official SDKs (timeout 1 s, 2 retries) against the loopback fakes answering after 3 s, and how many
requests the fake received (one per call: no retry after Stop).

Target: the call ends within 50 ms of Stop; requests received == calls made.
"""

from __future__ import annotations

import statistics
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from runs.providers import ProviderSettings, Stop, StopRequested, call  # noqa: E402
from tests.fakes.anthropic_api import FakeAnthropic  # noqa: E402
from tests.fakes.openai_api import FakeOpenAI  # noqa: E402

CALLS = 10
KINDS = [(FakeAnthropic, "anthropic", "", "claude-bench"), (FakeOpenAI, "openai", "/v1", "gpt-bench")]


def one(fake, kind: str, base: str, model: str) -> float:
    fake.script({"misbehave": "slow", "delay": 3})
    settings = ProviderSettings(
        kind=kind,
        api_key=fake.api_key,
        base_url=fake.url + base,
        max_retries=2,
        timeout=1.0,
        egress_allow=("127.0.0.0/8",),
    )
    stop = Stop()
    ended: dict[str, float] = {}
    request = {"model": model, "max_tokens": 50, "messages": [{"role": "user", "content": "hi"}]}

    def run() -> None:
        try:
            call(settings, request, lambda kind, text: None, stop=stop)
        except StopRequested:
            ended["at"] = time.perf_counter()

    before = len(fake.server.received)
    worker = threading.Thread(target=run)
    worker.start()
    while len(fake.server.received) == before:
        time.sleep(0.005)
    time.sleep(0.1)  # the request is out, its answer is not
    stopped = time.perf_counter()
    stop.set()
    worker.join(5)
    return (ended["at"] - stopped) * 1000


def main() -> int:
    for fake_class, kind, base, model in KINDS:
        with fake_class() as fake:
            times = [one(fake, kind, base, model) for _ in range(CALLS)]
            time.sleep(2.5)  # past the timeout and the back-off: a retry would have arrived
            print(
                f"{kind}: call ended {statistics.median(times):.2f} ms after Stop (median), "
                f"{max(times):.2f} ms (max) over {CALLS}; requests received {len(fake.server.received)} "
                f"for {CALLS} calls"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
