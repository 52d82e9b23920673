#!/usr/bin/env bash
# Run a command with KEB_TEST_DATABASE_URL pointing at a PostgreSQL server.
#
#   scripts/with-postgres.sh <command...>
#
# If KEB_TEST_DATABASE_URL is already set, the command just runs against that
# server. Otherwise a throwaway cluster is started (scripts/postgres.sh), the
# command runs, and the cluster is always stopped and removed afterwards. The
# exit status is the command's.
set -euo pipefail

[[ $# -gt 0 ]] || { echo "usage: $0 <command...>" >&2; exit 2; }

if [[ -n ${KEB_TEST_DATABASE_URL:-} ]]; then
	exec "$@"
fi

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# /tmp rather than $TMPDIR: the cluster owner (nobody) must be able to reach it
# and the unix socket path must stay short.
dir=$(mktemp -d /tmp/keb-pg.XXXXXX)

cleanup() {
	bash "$here/postgres.sh" stop "$dir" || echo "with-postgres.sh: failed to stop cluster in $dir" >&2
}
trap cleanup EXIT
# Turn signals into a normal exit so the EXIT trap runs.
trap 'exit 130' INT
trap 'exit 143' TERM
trap 'exit 129' HUP

KEB_TEST_DATABASE_URL=$(bash "$here/postgres.sh" start "$dir")
export KEB_TEST_DATABASE_URL
echo "with-postgres.sh: PostgreSQL at ${KEB_TEST_DATABASE_URL/:keb@/:***@}" >&2

# Not exec: the trap must run after the command. "|| status=$?" keeps set -e
# from exiting before we record the status.
status=0
"$@" || status=$?
exit "$status"
