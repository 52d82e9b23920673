#!/usr/bin/env bash
# Throwaway Kubernetes API server (kube-apiserver + etcd, no nodes, no
# controllers) for tests, the way envtest runs one.
#
#   scripts/kube.sh build                  build kube-apiserver into the cache
#                                          (skipped if already there); prints its path
#   scripts/kube.sh start <dir> [<pid>]    start etcd + kube-apiserver in <dir>;
#                                          prints the path of <dir>/kubeconfig.
#                                          With <pid> (the caller), a detached
#                                          reaper runs "stop <dir>" once <pid>
#                                          exits, should the caller never do it
#                                          (killed, timed out)
#   scripts/kube.sh stop <dir>             stop both (and the reaper), remove <dir>
#   scripts/kube.sh reap <dir> <pid>       wait until <pid> exits, then "stop <dir>"
#   scripts/kube.sh kubectl                build kubectl of the same release into the
#                                          cache (skipped if already there); prints its path
#
# The binary is built from tools/kube-apiserver (a separate Go module) into
#   ${KEB_CACHE_DIR:-$HOME/.cache/keb}/bin/kube-apiserver-v1.34.2
# which takes several minutes the first time; KEB_KUBE_APISERVER may name a
# prebuilt binary instead. etcd comes from PATH, or Debian's etcd-server
# package is installed with apt-get when running as root.
#
# <dir> must not exist or be empty (e.g. fresh from mktemp -d); start claims it
# with a marker file, and stop refuses to remove a directory without one. The
# marker is locked while start runs, and stop waits for that, so a reaper
# never races a start whose caller died (start then fails on its own).
# All ports are random free loopback ports. The kubeconfig authenticates with
# a static bearer token (also in <dir>/token) of user "keb-admin" in group
# system:masters, which bypasses RBAC; the server's CA is embedded in it.
#
# Only the API server runs: there is no controller manager, so namespaces
# being deleted stay Terminating, there is no garbage collection and no
# default ServiceAccount. ServiceAccount admission is disabled so that pods can
# still be created.
#
# Paths go to stdout; everything else goes to stderr, so callers can do
# KUBECONFIG=$(scripts/kube.sh start "$dir").
set -euo pipefail

K8S_VERSION=v1.34.2
# Marker so "stop" never removes a directory this script did not set up.
MARKER=.keb-kube
ADMIN_USER=keb-admin
OWNER=

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
CACHE_DIR=${KEB_CACHE_DIR:-$HOME/.cache/keb}
BIN_DIR=$CACHE_DIR/bin
APISERVER_BIN=${KEB_KUBE_APISERVER:-$BIN_DIR/kube-apiserver-$K8S_VERSION}

log() { echo "kube.sh: $*" >&2; }
die() { log "ERROR: $*"; exit 1; }

# ---------------------------------------------------------------- build ----

# build_k8s_cmd NAME BIN: builds k8s.io/kubernetes/cmd/NAME of K8S_VERSION into BIN once (parallel
# callers wait for the first), stamped as an official build (kubectl version, /version), and
# prints BIN.
build_k8s_cmd() {
	local name=$1 bin=$2
	if [[ -x $bin ]]; then
		echo "$bin"
		return 0
	fi
	command -v go >/dev/null 2>&1 || die "go not found (needed to build $name)"
	mkdir -p "$(dirname "$bin")"
	exec 8>"$BIN_DIR/.$name.lock"
	flock 8
	if [[ -x $bin ]]; then
		exec 8>&-
		echo "$bin"
		return 0
	fi
	log "building $name $K8S_VERSION into $bin (minutes the first time)"
	local tmp=$bin.tmp.$$ start=$SECONDS pkg=k8s.io/component-base/version
	local ldflags="-s -w -X $pkg.gitVersion=$K8S_VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=34 -X $pkg.gitTreeState=clean"
	if ! (cd "$ROOT/tools/kube-apiserver" &&
		GOWORK=off GOFLAGS= CGO_ENABLED=0 go build -mod=readonly -buildvcs=false \
			-ldflags "$ldflags" -o "$tmp" "k8s.io/kubernetes/cmd/$name" >&2); then
		rm -f "$tmp"
		die "building $name failed"
	fi
	mv -f "$tmp" "$bin"
	exec 8>&-
	log "built $name in $((SECONDS - start))s"
	echo "$bin"
}

cmd_build() {
	if [[ ! -x $APISERVER_BIN && -n ${KEB_KUBE_APISERVER:-} ]]; then
		die "KEB_KUBE_APISERVER=$KEB_KUBE_APISERVER is not an executable"
	fi
	build_k8s_cmd kube-apiserver "$APISERVER_BIN"
}

# -------------------------------------------------------------- kubectl ----

# The documents' commands use kubectl; a machine without one gets it built from the same
# Kubernetes release as the API server, into the cache, and its path printed.
cmd_kubectl() {
	build_k8s_cmd kubectl "$BIN_DIR/kubectl-$K8S_VERSION/kubectl"
}

# ---------------------------------------------------------------- start ----

install_etcd() {
	[[ $EUID -eq 0 ]] || die "etcd not found and not root; install etcd (Debian: etcd-server)"
	command -v apt-get >/dev/null 2>&1 || die "etcd not found and apt-get unavailable; install etcd"
	# Parallel callers may all get here at once; serialise on the dpkg work.
	exec 9>/tmp/keb-etcd-install.lock
	flock 9
	if command -v etcd >/dev/null 2>&1; then
		exec 9>&-
		return 0
	fi
	log "etcd not found; installing etcd-server with apt-get"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -q >&2
	apt-get install -y -q --no-install-recommends etcd-server >&2
	exec 9>&-
}

# True if something already accepts connections on 127.0.0.1:$1.
port_in_use() {
	(exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

# A random port below the kernel's ephemeral range (32768+), so outgoing
# connections don't take it, that nothing listens on right now.
random_port() {
	local port
	while :; do
		port=$((15000 + RANDOM % 17000))
		port_in_use "$port" || { echo "$port"; return 0; }
	done
}

# True if pid file $1 names a live process. Unless $2 is "ours" (a process
# this invocation just started, which may not have exec'd yet), it must also
# have been started for this directory (the directory, or a path in it, is one
# of its arguments), so that a recycled pid is never killed.
alive() {
	local pidfile=$1 pid dir args
	[[ -f $pidfile ]] || return 1
	pid=$(<"$pidfile")
	[[ -n $pid ]] && kill -0 "$pid" 2>/dev/null || return 1
	[[ ${2:-} == ours ]] && return 0
	dir=$(dirname "$pidfile")
	args=$(tr '\0' '\n' <"/proc/$pid/cmdline" 2>/dev/null) || return 1
	grep -qxF -- "$dir" <<<"$args" || grep -qF -- "$dir/" <<<"$args"
}

# Stop the process of pid file $1 ($2: see alive): SIGTERM, then SIGKILL
# after a grace period; with $3 = kill, SIGKILL at once.
stop_process() {
	local pidfile=$1 pid i
	alive "$pidfile" "${2:-}" || { rm -f "$pidfile"; return 0; }
	pid=$(<"$pidfile")
	if [[ ${3:-} != kill ]]; then
		kill -TERM "$pid" 2>/dev/null || true
		for i in $(seq 1 100); do
			kill -0 "$pid" 2>/dev/null || break
			sleep 0.1
		done
	fi
	if kill -0 "$pid" 2>/dev/null; then
		[[ ${3:-} == kill ]] || log "pid $pid did not stop on SIGTERM; killing it"
		kill -KILL "$pid" 2>/dev/null || true
		for i in $(seq 1 50); do
			kill -0 "$pid" 2>/dev/null || break
			sleep 0.1
		done
	fi
	rm -f "$pidfile"
}

# kube-apiserver shuts down gracefully; etcd's data is thrown away anyway, so
# it gets no grace period (it would take seconds).
stop_processes() {
	local dir=$1
	stop_process "$dir/kube-apiserver.pid" "${2:-}"
	stop_process "$dir/etcd.pid" "${2:-}" kill
}

# start's caller (if given) is gone: no use going on.
owner_gone() {
	[[ -n $OWNER ]] && ! kill -0 "$OWNER" 2>/dev/null
}

# Wait until the process of pid file $1 is serving, as judged by command $2..;
# returns 1 as soon as the process has exited, 2 on timeout ($TIMEOUT seconds).
wait_ready() {
	local pidfile=$1 deadline=$((SECONDS + TIMEOUT))
	shift
	while ((SECONDS < deadline)); do
		owner_gone && die "caller (pid $OWNER) exited; giving up"
		alive "$pidfile" ours || return 1
		"$@" && return 0
		sleep 0.2
	done
	return 2
}

etcd_healthy() {
	curl -sf --max-time 2 "http://127.0.0.1:$1/health" 2>/dev/null | grep -q '"health": *"true"'
}

apiserver_ready() {
	local dir=$1 port=$2
	[[ $(curl -s --max-time 5 --cacert "$dir/pki/ca.crt" -H "Authorization: Bearer $(<"$dir/token")" \
		"https://127.0.0.1:$port/readyz" 2>/dev/null) == ok ]]
}

gen_pki() {
	local pki=$1
	mkdir -p "$pki"
	(
		cd "$pki"
		# CA and a serving certificate for the loopback names the clients use
		# (plus the in-cluster names, for completeness).
		openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 3650 \
			-subj "/CN=keb-test-kube-ca" -keyout ca.key -out ca.crt 2>/dev/null
		openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
			-subj "/CN=kube-apiserver" -keyout apiserver.key -out apiserver.csr 2>/dev/null
		cat >apiserver.ext <<-'EOF'
			basicConstraints = critical, CA:FALSE
			keyUsage = critical, digitalSignature, keyEncipherment
			extendedKeyUsage = serverAuth
			subjectAltName = IP:127.0.0.1, IP:10.0.0.1, DNS:localhost, DNS:kubernetes, DNS:kubernetes.default, DNS:kubernetes.default.svc, DNS:kubernetes.default.svc.cluster.local
		EOF
		openssl x509 -req -in apiserver.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 3650 \
			-extfile apiserver.ext -out apiserver.crt 2>/dev/null
		# Service-account token signing key pair.
		openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out sa.key 2>/dev/null
		openssl pkey -in sa.key -pubout -out sa.pub 2>/dev/null
		chmod 600 ./*.key
	) || die "generating certificates with openssl failed"
}

start_etcd() {
	local dir=$1 attempt cport pport rc
	# etcd 3.4 refuses to run on other architectures than amd64 without this
	# (and warns about it on amd64).
	case $(uname -m) in
	x86_64 | amd64) ;;
	aarch64 | arm64) export ETCD_UNSUPPORTED_ARCH=arm64 ;;
	*) export ETCD_UNSUPPORTED_ARCH=$(uname -m) ;;
	esac
	for attempt in $(seq 1 20); do
		cport=$(random_port)
		pport=$(random_port)
		[[ $cport != "$pport" ]] || continue
		rm -rf "$dir/etcd"
		etcd --name keb-test --data-dir "$dir/etcd" \
			--listen-client-urls "http://127.0.0.1:$cport" --advertise-client-urls "http://127.0.0.1:$cport" \
			--listen-peer-urls "http://127.0.0.1:$pport" --initial-advertise-peer-urls "http://127.0.0.1:$pport" \
			--initial-cluster "keb-test=http://127.0.0.1:$pport" --initial-cluster-state new \
			--logger zap --log-outputs stderr --log-level warn \
			</dev/null >"$dir/etcd.log" 2>&1 7>&- &
		echo $! >"$dir/etcd.pid"
		disown # no "Killed" job notices when stopped
		rc=0
		wait_ready "$dir/etcd.pid" etcd_healthy "$cport" || rc=$?
		if ((rc == 0)); then
			echo "$cport" >"$dir/etcd.port"
			return 0
		fi
		stop_process "$dir/etcd.pid" ours
		if ((rc == 1)) && grep -qi 'address already in use' "$dir/etcd.log"; then
			log "etcd ports $cport/$pport busy, retrying"
			continue
		fi
		tail -n 30 "$dir/etcd.log" >&2 || true
		die "etcd did not become healthy (see $dir/etcd.log)"
	done
	die "could not find free ports for etcd"
}

start_apiserver() {
	local dir=$1 bin=$2 etcd_port=$3 attempt port rc
	for attempt in $(seq 1 20); do
		port=$(random_port)
		# Flags: see "kube-apiserver --help". The admin token is the only way
		# in (besides anonymous access to the health endpoints).
		"$bin" \
			--bind-address=127.0.0.1 \
			--advertise-address=127.0.0.1 \
			--secure-port="$port" \
			--etcd-servers="http://127.0.0.1:$etcd_port" \
			--cert-dir="$dir/pki/generated" \
			--tls-cert-file="$dir/pki/apiserver.crt" \
			--tls-private-key-file="$dir/pki/apiserver.key" \
			--token-auth-file="$dir/tokens.csv" \
			--authorization-mode=RBAC \
			--service-account-issuer="https://127.0.0.1:$port" \
			--service-account-key-file="$dir/pki/sa.pub" \
			--service-account-signing-key-file="$dir/pki/sa.key" \
			--service-cluster-ip-range=10.0.0.0/24 \
			--endpoint-reconciler-type=none \
			--disable-admission-plugins=ServiceAccount \
			--allow-privileged=true \
			--profiling=false \
			</dev/null >"$dir/kube-apiserver.log" 2>&1 7>&- &
		echo $! >"$dir/kube-apiserver.pid"
		disown
		rc=0
		wait_ready "$dir/kube-apiserver.pid" apiserver_ready "$dir" "$port" || rc=$?
		if ((rc == 0)); then
			echo "$port" >"$dir/kube-apiserver.port"
			return 0
		fi
		stop_process "$dir/kube-apiserver.pid" ours
		if ((rc == 1)) && grep -qiE 'address already in use' "$dir/kube-apiserver.log"; then
			log "port $port busy, retrying"
			continue
		fi
		tail -n 40 "$dir/kube-apiserver.log" >&2 || true
		die "kube-apiserver did not become ready (see $dir/kube-apiserver.log)"
	done
	die "could not find a free port for kube-apiserver"
}

cmd_start() {
	local dir=${1:?usage: kube.sh start <dir> [<pid>]}
	OWNER=${2:-}
	[[ -z $OWNER || $OWNER =~ ^[0-9]+$ ]] || die "not a pid: $OWNER"
	mkdir -p "$dir"
	dir=$(cd "$dir" && pwd -P)
	[[ -z $(ls -A "$dir") ]] || die "$dir is not empty"
	touch "$dir/$MARKER"
	# Held until start exits ("stop" waits for it); children must not inherit it.
	exec 7<"$dir/$MARKER"
	flock 7
	if [[ -n $OWNER ]]; then
		# Own session: out of the caller's signals. No stdio: a caller reading
		# our stdout must not wait for the reaper.
		setsid bash "${BASH_SOURCE[0]}" reap "$dir" "$OWNER" </dev/null >/dev/null 2>&1 7>&- &
		echo $! >"$dir/reaper.pid"
	fi

	command -v openssl >/dev/null 2>&1 || die "openssl not found"
	command -v curl >/dev/null 2>&1 || die "curl not found"
	command -v etcd >/dev/null 2>&1 || install_etcd
	command -v etcd >/dev/null 2>&1 || die "etcd still not found after installing etcd-server"
	local bin
	bin=$(cmd_build)
	TIMEOUT=${KEB_KUBE_START_TIMEOUT:-300}

	# On any failure, do not leave processes behind (the caller's "stop"
	# removes the directory).
	# shellcheck disable=SC2064 # expand $dir now
	trap "stop_processes $(printf %q "$dir") ours" EXIT

	gen_pki "$dir/pki"
	local token
	token=$(openssl rand -hex 32)
	printf '%s\n' "$token" >"$dir/token"
	printf '%s,%s,%s,"%s"\n' "$token" "$ADMIN_USER" "$ADMIN_USER" "system:masters" >"$dir/tokens.csv"
	chmod 600 "$dir/token" "$dir/tokens.csv"

	local start=$SECONDS
	start_etcd "$dir"
	start_apiserver "$dir" "$bin" "$(<"$dir/etcd.port")"
	local port
	port=$(<"$dir/kube-apiserver.port")

	local kubeconfig=$dir/kubeconfig
	cat >"$kubeconfig" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: keb-test
  cluster:
    server: https://127.0.0.1:$port
    certificate-authority-data: $(base64 -w0 <"$dir/pki/ca.crt")
users:
- name: $ADMIN_USER
  user:
    token: $token
contexts:
- name: keb-test
  context:
    cluster: keb-test
    user: $ADMIN_USER
current-context: keb-test
EOF
	chmod 600 "$kubeconfig"
	owner_gone && die "caller (pid $OWNER) exited; giving up"
	trap - EXIT
	log "kube-apiserver ready at https://127.0.0.1:$port (etcd :$(<"$dir/etcd.port")) after $((SECONDS - start))s"
	echo "$kubeconfig"
}

# ----------------------------------------------------------- stop, reap ----

cmd_stop() {
	local dir=${1:?usage: kube.sh stop <dir>}
	[[ -d $dir ]] || return 0
	dir=$(cd "$dir" && pwd -P)
	[[ -e $dir/$MARKER ]] || die "$dir was not created by kube.sh start; refusing to remove it"
	cd /
	# Wait for a running start to finish (or give up: its caller died).
	if ! flock -w 300 "$dir/$MARKER" true 2>/dev/null; then
		[[ -e $dir/$MARKER ]] || return 0 # a concurrent stop (the reaper) got there first
		log "start in $dir still running after 300s; stopping anyway"
	fi
	[[ -e $dir/$MARKER ]] || return 0
	# The reaper, unless that is us.
	if [[ -z ${KEB_KUBE_REAPER:-} ]]; then
		stop_process "$dir/reaper.pid" "" kill
	fi
	stop_processes "$dir"
	rm -rf "$dir"
}

cmd_reap() {
	local dir=${1:?usage: kube.sh reap <dir> <pid>} pid=${2:?usage: kube.sh reap <dir> <pid>}
	while kill -0 "$pid" 2>/dev/null; do sleep 1; done
	KEB_KUBE_REAPER=1 cmd_stop "$dir"
}

case "${1:-}" in
build) shift; cmd_build "$@" ;;
kubectl) shift; cmd_kubectl "$@" ;;
start) shift; cmd_start "$@" ;;
stop) shift; cmd_stop "$@" ;;
reap) shift; cmd_reap "$@" ;;
*) echo "usage: $0 {build|start <dir>|stop <dir>|reap <dir> <pid>}" >&2; exit 2 ;;
esac
