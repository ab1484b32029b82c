"""The contrib and library apps' migrations, vendored with one squash each (issue 53).

- settings.MIGRATION_MODULES sends auth, admin, contenttypes, django_tasks_database and
  oauth2_provider to workbench/vendored_migrations/<app>/;
- each holds exact copies of the installed library's migration files, and one squashed migration
  whose ``replaces`` is that list exactly: a library upgrade that adds, changes or removes a
  migration fails here until ``scripts/vendor_migrations.py refresh`` ran;
- the squash is what the script generates from the library's chain now (its models as the chain
  leaves them), and an empty database applies it alone;
- the schema both chains build, and old databases migrating on: tests/ops/test_squashed_migrations.py.
"""

from __future__ import annotations

import importlib
from pathlib import Path

from django.apps import apps
from django.conf import settings
from django.db.migrations.loader import MigrationLoader

from tests.scripts import run_script

ROOT = Path(__file__).resolve().parents[2]
VENDORED_DIR = ROOT / "workbench" / "vendored_migrations"
VENDORED = ["admin", "auth", "contenttypes", "django_tasks_database", "oauth2_provider"]


def _upstream(label: str) -> dict[str, bytes]:
    module = importlib.import_module(apps.get_app_config(label).name + ".migrations")
    folder = Path(module.__file__ or "").parent
    return {p.name: p.read_bytes() for p in folder.glob("*.py") if p.stem[0] not in "_~"}


def _squash(label: str) -> Path:
    found = sorted((VENDORED_DIR / label).glob("0001_squashed_*.py"))
    assert len(found) == 1, (label, found)
    return found[0]


def test_the_vendored_apps_are_the_settings_and_the_folders():
    vendored = {
        k for k, v in settings.MIGRATION_MODULES.items() if v.startswith("workbench.vendored_migrations.")
    }
    assert sorted(vendored) == VENDORED
    folders = {p.name for p in VENDORED_DIR.iterdir() if (p / "__init__.py").is_file()}
    assert folders == vendored
    for label in VENDORED:
        assert settings.MIGRATION_MODULES[label] == f"workbench.vendored_migrations.{label}"


def test_the_vendored_files_are_exact_copies_of_the_library_s():
    for label in VENDORED:
        upstream = _upstream(label)
        assert upstream, label
        squash = _squash(label)
        present = {p.name for p in (VENDORED_DIR / label).glob("*.py")} - {"__init__.py", squash.name}
        assert present == set(upstream), label
        for name, data in upstream.items():
            assert (VENDORED_DIR / label / name).read_bytes() == data, f"{label}/{name}"


def test_each_squash_replaces_the_library_s_migrations_exactly():
    loader = MigrationLoader(None, ignore_no_migrations=True)
    for label in VENDORED:
        squash = _squash(label).stem
        migration = loader.disk_migrations[label, squash]
        names = sorted(p.removesuffix(".py") for p in _upstream(label))
        assert sorted(name for _, name in migration.replaces) == names, label
        assert {app for app, _ in migration.replaces} == {label}
        assert squash == f"0001_squashed_{names[-1]}"  # the name says up to which one


def test_an_empty_database_applies_only_the_squash_of_each_vendored_app():
    graph = MigrationLoader(None, ignore_no_migrations=True).graph  # nothing applied
    for label in VENDORED:
        assert [name for app, name in graph.nodes if app == label] == [_squash(label).stem]


def test_the_squashes_are_what_the_script_generates_from_the_library_s_chain():
    proc = run_script("vendor_migrations.py", "check", timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "vendored migrations: up to date" in proc.stdout


def test_no_migration_depends_on_a_vendored_squash_by_name():
    """A squash is renamed when its library adds a migration (``0001_squashed_<new last>``): a
    migration that names it would no longer load. The library's own names stay: depend on the last
    migration the squash replaces (Django follows it to the squash where that is applied)."""
    loader = MigrationLoader(None, ignore_no_migrations=True)
    squashes = {
        (label, _squash(label).stem): loader.disk_migrations[label, _squash(label).stem] for label in VENDORED
    }
    wrong = [
        f"{app}.{name} depends on {dep[0]}.{dep[1]}: name {tuple(squashes[tuple(dep)].replaces[-1])} instead"
        for (app, name), migration in sorted(loader.disk_migrations.items())
        for dep in migration.dependencies
        if tuple(dep) in squashes
    ]
    assert wrong == []
