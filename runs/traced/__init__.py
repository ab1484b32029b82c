"""Deprecated (one release): host code imports ``workbench_sdk.traced``, the server ``runs.execution.tracing``."""

from workbench_sdk.events import RecordedAnswer, recorded_answer  # noqa: F401
from workbench_sdk.traced import *  # noqa: F403

from runs.execution.tracing import SessionSink, Tracer, cache_replay, replay_for, tracer_for_session  # noqa: F401
