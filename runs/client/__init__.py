"""Deprecated (one release): the REST client is the host SDK's, ``workbench_sdk.client``."""

from workbench_sdk.client import *  # noqa: F403
