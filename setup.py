"""Build hooks: the one compiled module (the RFC 8785 canonicalizer ``runs.protocol._jcs``) and the
docs site (``mkdocs.yml`` built into ``workbench/docs_site/`` of the wheel, served at /docs/).

Everything else is in pyproject.toml. The extension is optional: where it cannot be
built (no C compiler or no OpenSSL headers), installation goes on and ``runs.protocol.canonical`` uses its
pure-Python path, which gives the same bytes.
"""

import os
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_py import build_py

HERE = Path(__file__).resolve().parent


class build_py_with_docs(build_py):
    """Builds the docs site (mkdocs build --strict) into the wheel's workbench/docs_site/. Editable
    installs skip it: `make setup` builds the site in place (`make docs`). A source tree without
    mkdocs.yml (an sdist) ships whatever site its package data holds."""

    def run(self) -> None:
        super().run()
        config = HERE / "mkdocs.yml"
        if self.editable_mode or not config.exists():
            return
        os.environ.setdefault("NO_MKDOCS_2_WARNING", "1")
        from mkdocs.commands.build import build
        from mkdocs.config import load_config

        site = Path(self.build_lib) / "workbench" / "docs_site"
        build(load_config(str(config), site_dir=str(site), strict=True))


setup(
    cmdclass={"build_py": build_py_with_docs},
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
