"""Build hooks: the one compiled module (the RFC 8785 canonicalizer ``runs.protocol._jcs``), the
templates and static files inside the wheel, and the docs site (``mkdocs.yml`` built into
``workbench/docs_site/`` of the wheel, served at /docs/).

Everything else is in pyproject.toml.

- ``runs.protocol._jcs``, the RFC 8785 canonicalizer in C, is optional: where it cannot be built
  (no C compiler or no OpenSSL headers), installation goes on and ``runs.protocol.canonical`` uses
  its pure-Python path, which gives the same bytes.
- ``templates/`` and ``static/`` live at the repository's root (where a checkout serves them);
  a wheel carries them inside the ``workbench`` package, as ``workbench/templates`` and
  ``workbench/static``, where ``workbench.settings`` (RESOURCE_DIR) finds them once installed.
  An editable install leaves them where they are.
"""

import os
import shutil
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_py import build_py

ROOT = Path(__file__).resolve().parent
RESOURCES = ("templates", "static")


class build_py_with_resources(build_py):
    """Copies templates/ and static/ into the wheel's workbench/ package, and builds the docs site
    (mkdocs build --strict) into workbench/docs_site/. Editable installs skip both: the settings
    read templates and static from the checkout, and `make setup` builds the site in place."""

    def run(self) -> None:
        super().run()
        if getattr(self, "editable_mode", False):
            return
        for name in RESOURCES:
            source = ROOT / name
            if not source.is_dir():  # an sdist without them (MANIFEST.in grafts both)
                raise SystemExit(f"setup.py: {source} is missing: the wheel would serve no pages")
            target = Path(self.build_lib) / "workbench" / name
            shutil.rmtree(target, ignore_errors=True)
            shutil.copytree(source, target, ignore=shutil.ignore_patterns("__pycache__", "*.pyc", ".*"))
        config = ROOT / "mkdocs.yml"
        if not config.exists():  # an sdist ships whatever site its package data holds
            return
        os.environ.setdefault("NO_MKDOCS_2_WARNING", "1")
        from mkdocs.commands.build import build
        from mkdocs.config import load_config

        site = Path(self.build_lib) / "workbench" / "docs_site"
        build(load_config(str(config), site_dir=str(site), strict=True))


setup(
    cmdclass={"build_py": build_py_with_resources},
    ext_modules=[
        Extension(
            "runs.protocol._jcs",
            sources=["runs/protocol/_jcs.c"],
            extra_compile_args=["-O2", "-std=c11", "-Wall", "-Wextra", "-D_GNU_SOURCE"],
            libraries=["crypto"],  # OpenSSL's SHA-256, the library CPython's hashlib uses
            optional=True,
        )
    ],
)
