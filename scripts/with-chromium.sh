#!/usr/bin/env bash
# Run a command with KEB_CHROMIUM naming a headless-capable Chromium, for the Swagger UI test
# (internal/apidoc), the way with-postgres.sh provides PostgreSQL.
#
#   scripts/with-chromium.sh <command...>
#
# KEB_CHROMIUM, when set, is used as it is. Otherwise chromium, chromium-browser or
# google-chrome is taken from PATH; when none is there and we are root, Debian's chromium
# package is installed with apt-get (once; later runs find it). Anything else is an error:
# the test would fail rather than skip.
set -euo pipefail

[[ $# -gt 0 ]] || { echo "usage: $0 <command...>" >&2; exit 2; }

find_chromium() {
	local c
	for c in chromium chromium-browser google-chrome; do
		if command -v "$c" >/dev/null 2>&1; then
			command -v "$c"
			return 0
		fi
	done
	return 1
}

if [[ -z ${KEB_CHROMIUM:-} ]]; then
	if ! KEB_CHROMIUM=$(find_chromium); then
		if [[ $(id -u) -ne 0 ]] || ! command -v apt-get >/dev/null 2>&1; then
			echo "with-chromium.sh: no Chromium on PATH; install chromium (Debian: apt-get install chromium) or set KEB_CHROMIUM" >&2
			exit 1
		fi
		echo "with-chromium.sh: installing chromium with apt-get" >&2
		export DEBIAN_FRONTEND=noninteractive
		apt-get install -y --no-install-recommends chromium >&2 || { apt-get update >&2 && apt-get install -y --no-install-recommends chromium >&2; }
		KEB_CHROMIUM=$(find_chromium)
	fi
fi
export KEB_CHROMIUM
echo "with-chromium.sh: Chromium at $KEB_CHROMIUM" >&2
exec "$@"
