#!/usr/bin/env bash
# Prints a Python interpreter >= 3.12 (Django 6 needs it), or fails loudly.
set -euo pipefail
for candidate in python3.13 python3.12 /root/.pyenv/versions/3.13*/bin/python3.13 /root/.pyenv/versions/3.12*/bin/python3.12 python3; do
  if command -v "$candidate" >/dev/null 2>&1 && "$candidate" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 12) else 1)' 2>/dev/null; then
    command -v "$candidate"
    exit 0
  fi
done
echo "no Python >= 3.12 found (install python3.12)" >&2
exit 1
