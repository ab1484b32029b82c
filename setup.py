"""Build hook for the one compiled module: the RFC 8785 canonicalizer ``runs.protocol._jcs``.

Everything else is in pyproject.toml. The extension is optional: where it cannot be
built (no C compiler or no OpenSSL headers), installation goes on and ``runs.protocol.canonical`` uses its
pure-Python path, which gives the same bytes.
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "runs.protocol._jcs",
            sources=["runs/protocol/_jcs.c"],
            extra_compile_args=["-O2", "-std=c11", "-Wall", "-Wextra", "-D_GNU_SOURCE"],
            libraries=["crypto"],  # OpenSSL's SHA-256, the library CPython's hashlib uses
            optional=True,
        )
    ]
)
