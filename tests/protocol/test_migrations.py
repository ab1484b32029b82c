from __future__ import annotations

import pytest

from runs.protocol import migrations
from runs.protocol.errors import ErrorCode, ProtocolError
from runs.protocol.integrity import seal_bundle, verify_integrity


@pytest.fixture
def old_versions():
    @migrations.register("0.8.0", "0.9.0")
    def rename_events(bundle: dict) -> dict:
        bundle["trace"] = bundle.pop("events")
        return bundle

    @migrations.register("0.9.0", "1.0.0")
    def add_rule_sets(bundle: dict) -> dict:
        bundle.setdefault("ruleSets", [])
        return bundle

    yield
    migrations.unregister("0.8.0")
    migrations.unregister("0.9.0")


def test_current_bundle_is_untouched() -> None:
    bundle = {"protocolVersion": "1.0.0", "run": {}}
    assert migrations.migrate_bundle(bundle) == (bundle, False)


def test_migrates_step_by_step_and_re_signs(old_versions) -> None:
    old = {"protocolVersion": "0.8.0", "run": {"id": "r"}, "events": [], "artifacts": []}
    migrated, changed = migrations.migrate_bundle(old)
    assert changed is True
    assert migrated["protocolVersion"] == "1.0.0"
    assert migrated["trace"] == [] and migrated["ruleSets"] == [] and "events" not in migrated
    assert verify_integrity(migrated) == "valid"
    assert old["protocolVersion"] == "0.8.0" and "events" in old  # input untouched
    assert migrations.migration_path("0.8.0") == ["0.9.0", "1.0.0"]


@pytest.mark.parametrize("bundle", [{"run": {}}, {"protocolVersion": "2.0.0"}, {"protocolVersion": 1}])
def test_unsupported_versions(bundle: dict) -> None:
    with pytest.raises(ProtocolError) as info:
        migrations.migrate_bundle(seal_bundle(bundle))
    assert info.value.code == ErrorCode.UNSUPPORTED_PROTOCOL_VERSION
    assert info.value.path == "protocolVersion"


def test_duplicate_registration_is_refused(old_versions) -> None:
    with pytest.raises(ValueError):
        migrations.register("0.9.0", "1.0.0")(lambda b: b)
