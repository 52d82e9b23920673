#!/usr/bin/env bash
# Throwaway OCI registry (Debian's docker-registry, distribution 2.x) for tests.
#
#   scripts/registry.sh install                    install docker-registry (+ htpasswd) if missing
#   scripts/registry.sh start <dir> [pid]          start a registry in <dir>; prints host:port
#   scripts/registry.sh stop <dir>                 stop it and remove <dir>
#   scripts/registry.sh reap <dir> <pid>           wait until <pid> exits, then "stop <dir>"
#
# start listens on a random loopback port. With KEB_REGISTRY_AUTH=user:password it
# requires basic auth (htpasswd, bcrypt); with KEB_REGISTRY_TLS=1 it serves HTTPS
# with a self-signed certificate for 127.0.0.1/localhost written to <dir>/ca.crt.
# With a pid, a detached reaper stops the registry once that process is gone.
# host:port goes to stdout and <dir>/addr; everything else to stderr.
set -euo pipefail

MARKER=.keb-registry

log() { echo "registry.sh: $*" >&2; }
die() { log "ERROR: $*"; exit 1; }

find_registry() {
	command -v docker-registry 2>/dev/null || { [[ -x /usr/bin/docker-registry ]] && echo /usr/bin/docker-registry; }
}

cmd_install() {
	if find_registry >/dev/null && command -v htpasswd >/dev/null && command -v openssl >/dev/null && command -v curl >/dev/null; then
		return 0
	fi
	[[ $EUID -eq 0 ]] || die "docker-registry/htpasswd/openssl missing and not root; apt-get install docker-registry apache2-utils openssl"
	command -v apt-get >/dev/null 2>&1 || die "docker-registry missing and apt-get unavailable"
	# Parallel test binaries may all get here at once; serialise on the dpkg work.
	exec 9>/tmp/keb-registry-install.lock
	flock 9
	if ! { find_registry >/dev/null && command -v htpasswd >/dev/null && command -v openssl >/dev/null; }; then
		log "installing docker-registry apache2-utils openssl with apt-get"
		export DEBIAN_FRONTEND=noninteractive
		apt-get update -q >&2
		apt-get install -y -q --no-install-recommends docker-registry apache2-utils openssl curl >&2
		# The package may start its own service on :5000; tests do not want it.
		if command -v systemctl >/dev/null 2>&1; then systemctl disable --now docker-registry >&2 2>/dev/null || true; fi
	fi
	exec 9>&-
}

port_in_use() {
	(exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

cmd_start() {
	local dir=${1:?usage: registry.sh start <dir> [pid]} owner=${2:-}
	cmd_install
	mkdir -p "$dir"
	dir=$(cd "$dir" && pwd -P)
	touch "$dir/$MARKER"
	mkdir -p "$dir/data"

	local scheme=http auth_cfg="" tls_cfg=""
	if [[ -n ${KEB_REGISTRY_AUTH:-} ]]; then
		local user=${KEB_REGISTRY_AUTH%%:*} pass=${KEB_REGISTRY_AUTH#*:}
		htpasswd -Bbn "$user" "$pass" >"$dir/htpasswd" 2>/dev/null || die "htpasswd failed"
		auth_cfg="auth:
  htpasswd:
    realm: keb-test
    path: $dir/htpasswd"
	fi
	if [[ ${KEB_REGISTRY_TLS:-} == 1 ]]; then
		scheme=https
		openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj "/CN=keb-test-registry" \
			-addext "subjectAltName=IP:127.0.0.1,DNS:localhost" \
			-keyout "$dir/tls.key" -out "$dir/ca.crt" >/dev/null 2>&1 || die "openssl failed"
		tls_cfg="  tls:
    certificate: $dir/ca.crt
    key: $dir/tls.key"
	fi

	local attempt port started=
	for attempt in $(seq 1 20); do
		port=$((15000 + RANDOM % 17000))
		port_in_use "$port" && continue
		cat >"$dir/config.yml" <<EOF
version: 0.1
log:
  level: warn
  accesslog:
    disabled: true
storage:
  filesystem:
    rootdirectory: $dir/data
  delete:
    enabled: true
http:
  addr: 127.0.0.1:$port
  secret: keb-test-registry
$tls_cfg
$auth_cfg
EOF
		"$(find_registry)" serve "$dir/config.yml" >"$dir/registry.log" 2>&1 &
		echo $! >"$dir/pid"
		local i
		for i in $(seq 1 100); do
			if ! kill -0 "$(cat "$dir/pid")" 2>/dev/null; then break; fi
			# 401 (auth) or 200 both mean it serves.
			if curl -ks -o /dev/null -w '%{http_code}' "$scheme://127.0.0.1:$port/v2/" 2>/dev/null | grep -qE '^(200|401)$'; then
				started=1
				break
			fi
			sleep 0.1
		done
		[[ -n $started ]] && break
		kill "$(cat "$dir/pid")" 2>/dev/null || true
		if grep -qi 'address already in use' "$dir/registry.log"; then
			log "port $port busy, retrying"
			continue
		fi
		cat "$dir/registry.log" >&2
		die "docker-registry did not start"
	done
	[[ -n $started ]] || die "could not find a free port"
	if [[ -n $owner ]]; then
		# Detached: survives this script, stops the registry when owner dies.
		setsid bash "${BASH_SOURCE[0]}" reap "$dir" "$owner" </dev/null >/dev/null 2>&1 &
	fi
	echo "127.0.0.1:$port" >"$dir/addr"
	echo "127.0.0.1:$port"
}

cmd_stop() {
	local dir=${1:?usage: registry.sh stop <dir>}
	[[ -d $dir ]] || return 0
	[[ -e $dir/$MARKER ]] || die "$dir was not created by registry.sh start; refusing to remove it"
	if [[ -f $dir/pid ]]; then
		local pid
		pid=$(cat "$dir/pid")
		kill "$pid" 2>/dev/null || true
		local i
		for i in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
		kill -9 "$pid" 2>/dev/null || true
	fi
	rm -rf "$dir"
}

cmd_reap() {
	local dir=${1:?usage: registry.sh reap <dir> <pid>} pid=${2:?usage: registry.sh reap <dir> <pid>}
	while kill -0 "$pid" 2>/dev/null && [[ -d $dir ]]; do sleep 1; done
	cmd_stop "$dir"
}

case "${1:-}" in
install) shift; cmd_install ;;
start) shift; cmd_start "$@" ;;
stop) shift; cmd_stop "$@" ;;
reap) shift; cmd_reap "$@" ;;
*) echo "usage: $0 {install|start <dir> [pid]|stop <dir>|reap <dir> <pid>}" >&2; exit 2 ;;
esac
