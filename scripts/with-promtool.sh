#!/usr/bin/env bash
# Run a command with KEB_PROMTOOL naming Prometheus's promtool, for the chart's rule check
# (resources/chart), the way with-chromium.sh provides Chromium.
#
#   scripts/with-promtool.sh <command...>
#
# KEB_PROMTOOL, when set, is used as it is. Otherwise promtool is taken from PATH; when it is
# not there and we are root, Debian's prometheus package (which ships promtool) is installed
# with apt-get (once; later runs find it). Anything else is an error: the test would fail
# rather than skip.
set -euo pipefail

[[ $# -gt 0 ]] || { echo "usage: $0 <command...>" >&2; exit 2; }

if [[ -z ${KEB_PROMTOOL:-} ]]; then
	if ! KEB_PROMTOOL=$(command -v promtool); then
		if [[ $(id -u) -ne 0 ]] || ! command -v apt-get >/dev/null 2>&1; then
			echo "with-promtool.sh: no promtool on PATH; install it (Debian: apt-get install prometheus) or set KEB_PROMTOOL" >&2
			exit 1
		fi
		echo "with-promtool.sh: installing prometheus (for promtool) with apt-get" >&2
		export DEBIAN_FRONTEND=noninteractive

		apt-get install -y --no-install-recommends prometheus >&2 || { apt-get update >&2 && apt-get install -y --no-install-recommends prometheus >&2; }
		KEB_PROMTOOL=$(command -v promtool)
	fi
fi
export KEB_PROMTOOL
echo "with-promtool.sh: promtool at $KEB_PROMTOOL" >&2
exec "$@"
