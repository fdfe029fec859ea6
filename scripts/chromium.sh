#!/usr/bin/env bash
# Installs Debian's chromium for the console's browser tests when it is
# missing (internal/console/browsertest finds it in PATH). Without root or
# apt-get it says why and leaves the tests to skip; it never downloads a
# browser build of its own.
set -euo pipefail
if command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 || [ -n "${DROVER_CHROMIUM:-}" ]; then
	exit 0
fi
if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
	echo "installing chromium for the console's browser tests" >&2
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq && apt-get install -y -qq chromium >/dev/null
else
	echo "note: no chromium, and it cannot be installed here (needs root and apt-get): the console's browser tests will skip" >&2
fi
