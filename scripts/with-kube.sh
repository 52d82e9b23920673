#!/usr/bin/env bash
# Run a command with KEB_TEST_KUBECONFIG naming the kubeconfig file of a
# Kubernetes API server.
#
#   scripts/with-kube.sh <command...>
#
# If KEB_TEST_KUBECONFIG is already set, the command just runs against that
# server. Otherwise kube-apiserver is built if needed and a throwaway server is
# started (scripts/kube.sh), the command runs, and the server is always stopped
# and removed afterwards. The exit status is the command's.
set -euo pipefail

[[ $# -gt 0 ]] || { echo "usage: $0 <command...>" >&2; exit 2; }

if [[ -n ${KEB_TEST_KUBECONFIG:-} ]]; then
	exec "$@"
fi

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# Build first (minutes on a cold cache) so that no directory or process is
# left over if it fails.
bash "$here/kube.sh" build >/dev/null
# The documents' commands (docs test) talk to the server with kubectl and read JSON with jq.
if ! command -v kubectl >/dev/null 2>&1; then
	PATH="$(dirname "$(bash "$here/kube.sh" kubectl)"):$PATH"
	export PATH
fi
for tool in jq curl openssl; do
	if ! command -v "$tool" >/dev/null 2>&1; then
		[[ $EUID -eq 0 ]] && command -v apt-get >/dev/null 2>&1 || { echo "with-kube.sh: $tool not found; install it" >&2; exit 1; }
		(
			flock 9
			command -v "$tool" >/dev/null 2>&1 || {
				DEBIAN_FRONTEND=noninteractive apt-get update -q >&2
				DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "$tool" >&2
			}
		) 9>/tmp/keb-tools-install.lock
	fi
done

dir=$(mktemp -d /tmp/keb-kube.XXXXXX)

cleanup() {
	bash "$here/kube.sh" stop "$dir" || echo "with-kube.sh: failed to stop kube-apiserver in $dir" >&2
	# stop refuses a directory start never got to mark; it is empty then.
	rmdir "$dir" 2>/dev/null || true
}
trap cleanup EXIT
# Turn signals into a normal exit so the EXIT trap runs.
trap 'exit 130' INT
trap 'exit 143' TERM
trap 'exit 129' HUP

# With our pid, kube.sh leaves a detached reaper that stops the server should
# this script be killed without running its trap (SIGKILL).
KEB_TEST_KUBECONFIG=$(bash "$here/kube.sh" start "$dir" "$$")
export KEB_TEST_KUBECONFIG
echo "with-kube.sh: kube-apiserver kubeconfig at $KEB_TEST_KUBECONFIG" >&2

# Not exec: the trap must run after the command. "|| status=$?" keeps set -e
# from exiting before we record the status.
status=0
"$@" || status=$?
exit "$status"
