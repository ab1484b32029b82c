#!/usr/bin/env bash
# Browser tests drive Debian's Chromium through Playwright (Playwright's own download cannot work here).
set -euo pipefail
if [ -x /usr/bin/chromium ]; then exit 0; fi
echo "installing chromium from apt (about 90 s)"
export DEBIAN_FRONTEND=noninteractive
SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
$SUDO apt-get update -qq || true
$SUDO apt-get install -y -qq chromium >/dev/null
