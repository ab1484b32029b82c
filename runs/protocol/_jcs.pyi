"""Types of the optional C accelerator built from _jcs.c (see canonical.py)."""

from collections.abc import Buffer
from typing import final

@final
class CanonicalText:
    """Canonical JSON bytes (buffer protocol, no copy)."""

    @property
    def unsafe_integers(self) -> bool: ...
    def __buffer__(self, flags: int, /) -> memoryview: ...
    def __len__(self) -> int: ...

def canonicalize(data: Buffer, members: tuple[str, ...] | None = None) -> CanonicalText: ...
def canonical_sha256(
    data: Buffer, members: tuple[str, ...] | None = None
) -> tuple[str, bool, tuple[tuple[str | None, int], ...] | None]: ...
