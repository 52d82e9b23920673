#!/usr/bin/env bash
# Throwaway PostgreSQL cluster for tests and benchmarks.
#
#   scripts/postgres.sh start <dir>        create + start a cluster in <dir>; prints its URL
#   scripts/postgres.sh stop <dir>         stop the cluster and remove <dir>
#   scripts/postgres.sh reap <dir> <pid>   wait until <pid> exits, then "stop <dir>"
#                                          (safety net for killed/timed-out test binaries)
#   scripts/postgres.sh pause <dir>        stop the server, keeping the cluster (an outage)
#   scripts/postgres.sh resume <dir>       start a paused server again on the same port
#
# The URL (postgres://keb:keb@127.0.0.1:PORT/postgres?sslmode=disable) goes to
# stdout and to <dir>/url; everything else goes to stderr, so callers can do
# URL=$(scripts/postgres.sh start "$dir").
#
# initdb refuses to run as root, so when run as root the cluster is created and
# run as the unprivileged user $KEB_PG_USER (default: nobody) in <dir>, which is
# chowned to that user. As a non-root user the cluster runs as that user.
set -euo pipefail

PG_SUPERUSER=keb
PG_PASSWORD=keb
RUN_AS=${KEB_PG_USER:-nobody}
# Marker so "stop" never removes a directory this script did not set up.
MARKER=.keb-postgres

log() { echo "postgres.sh: $*" >&2; }
die() { log "ERROR: $*"; exit 1; }

# runuser lives in /usr/sbin, which a root PATH may lack.
RUNUSER=$(command -v runuser || echo /usr/sbin/runuser)

# Run a command as the cluster owner.
as_owner() {
	if [[ $EUID -eq 0 ]]; then
		"$RUNUSER" -u "$RUN_AS" -- "$@"
	else
		"$@"
	fi
}

# Debian/Ubuntu packages keep initdb/pg_ctl off PATH, in /usr/lib/postgresql/<ver>/bin.
find_pg_bin() {
	if command -v initdb >/dev/null 2>&1 && command -v pg_ctl >/dev/null 2>&1; then
		dirname "$(command -v initdb)"
		return 0
	fi
	local d
	for d in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V -r); do
		if [[ -x $d/initdb && -x $d/pg_ctl ]]; then
			echo "$d"
			return 0
		fi
	done
	return 1
}

install_postgres() {
	[[ $EUID -eq 0 ]] || die "PostgreSQL server binaries (initdb) not found and not root; install postgresql"
	command -v apt-get >/dev/null 2>&1 || die "initdb not found and apt-get unavailable; install postgresql"
	# Parallel test binaries may all get here at once; serialise on the dpkg work.
	exec 9>/tmp/keb-postgres-install.lock
	flock 9
	if find_pg_bin >/dev/null; then
		exec 9>&-
		return 0
	fi
	log "initdb not found; installing postgresql with apt-get"
	# Stop the Debian package from creating and starting its own "main" cluster
	# on port 5432: we only want the binaries.
	if [[ ! -e /etc/postgresql-common/createcluster.conf ]]; then
		mkdir -p /etc/postgresql-common
		echo "create_main_cluster = false" >/etc/postgresql-common/createcluster.conf
	fi
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -q >&2
	apt-get install -y -q --no-install-recommends postgresql >&2
	exec 9>&-
}

# True if something already accepts connections on 127.0.0.1:$1.
port_in_use() {
	(exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

cmd_start() {
	local dir=${1:?usage: postgres.sh start <dir>}
	mkdir -p "$dir"
	dir=$(cd "$dir" && pwd -P)
	[[ -e $dir/data ]] && die "$dir/data already exists"

	local bin
	if ! bin=$(find_pg_bin); then
		install_postgres
		bin=$(find_pg_bin) || die "initdb still not found after installing postgresql"
	fi

	# Unix socket paths are limited to ~107 bytes (incl. "/.s.PGSQL.NNNNN").
	local sockdir=$dir/sock
	((${#sockdir} <= 80)) || die "directory path too long for a unix socket: $sockdir (use a shorter directory)"

	mkdir -p "$sockdir"
	touch "$dir/$MARKER"
	if [[ $EUID -eq 0 ]]; then
		[[ -x $RUNUSER ]] || die "runuser not found (needed to run PostgreSQL as $RUN_AS)"
		id "$RUN_AS" >/dev/null 2>&1 || die "user $RUN_AS does not exist (set KEB_PG_USER)"
		chown -R "$RUN_AS" "$dir"
		# Every parent directory must be traversable by the cluster owner.
		as_owner test -w "$dir" ||
			die "$dir is not accessible to user $RUN_AS (is a parent directory private? try TMPDIR=/tmp)"
	fi
	# Tools running as the owner must not depend on the caller's cwd being readable.
	cd "$dir"

	local pwfile=$dir/pwfile
	printf '%s\n' "$PG_PASSWORD" >"$pwfile"
	[[ $EUID -eq 0 ]] && chown "$RUN_AS" "$pwfile"
	# Superuser keb with a password: TCP (lib/pq) uses scram-sha-256, the
	# private unix socket is trusted. C locale avoids depending on system locales.
	if ! as_owner "$bin/initdb" -D "$dir/data" -U "$PG_SUPERUSER" --pwfile="$pwfile" \
		--auth-host=scram-sha-256 --auth-local=trust -E UTF8 --locale=C >"$dir/initdb.log" 2>&1; then
		cat "$dir/initdb.log" >&2
		die "initdb failed"
	fi
	rm -f "$pwfile"

	# fsync stays on on purpose: benchmarks must measure durable commits.
	cat >>"$dir/data/postgresql.conf" <<EOF

# --- added by scripts/postgres.sh ---
listen_addresses = '127.0.0.1'
unix_socket_directories = '$sockdir'
max_connections = 300
shared_buffers = 256MB
fsync = on
# Loaded (not created) so a bench or an engineer can CREATE EXTENSION pg_stat_statements and see
# the statements per figure; it costs nothing until then.
shared_preload_libraries = 'pg_stat_statements'
EOF

	# Pick a random port below the kernel's ephemeral range (32768+) so outgoing
	# connections don't take it; retry if another process wins a bind race.
	local attempt port started=
	for attempt in $(seq 1 20); do
		port=$((15000 + RANDOM % 17000))
		port_in_use "$port" && continue
		rm -f "$dir/postgres.log"
		if as_owner "$bin/pg_ctl" -D "$dir/data" -l "$dir/postgres.log" -o "-p $port" -w -t 120 start >&2; then
			started=1
			break
		fi
		if grep -qiE 'could not bind|address already in use|could not create any TCP/IP sockets' "$dir/postgres.log" 2>/dev/null; then
			log "port $port busy, retrying"
			continue
		fi
		cat "$dir/postgres.log" >&2 || true
		die "pg_ctl start failed"
	done
	[[ -n $started ]] || die "could not find a free port"
	echo "$port" >"$dir/port"

	local url="postgres://$PG_SUPERUSER:$PG_PASSWORD@127.0.0.1:$port/postgres?sslmode=disable"
	# Check that the password login over TCP really works, as lib/pq will use it
	# (skipped if no psql client is installed; pg_ctl -w already saw "ready").
	local psql=$bin/psql
	[[ -x $psql ]] || psql=$(command -v psql || true)
	if [[ -n $psql ]]; then
		local ok=
		for attempt in $(seq 1 50); do
			if "$psql" "$url" -XAtqc 'select 1' >/dev/null 2>&1; then ok=1; break; fi
			sleep 0.2
		done
		[[ -n $ok ]] || die "server started but TCP login as $PG_SUPERUSER fails"
	fi

	echo "$url" >"$dir/url"
	echo "$url"
}

cmd_stop() {
	local dir=${1:?usage: postgres.sh stop <dir>}
	[[ -d $dir ]] || return 0
	dir=$(cd "$dir" && pwd -P)
	[[ -e $dir/$MARKER ]] || die "$dir was not created by postgres.sh start; refusing to remove it"
	cd /
	if [[ -f $dir/data/postmaster.pid ]]; then
		local bin
		bin=$(find_pg_bin) || die "pg_ctl not found"
		as_owner "$bin/pg_ctl" -D "$dir/data" -m fast -w -t 60 stop >&2 ||
			as_owner "$bin/pg_ctl" -D "$dir/data" -m immediate -w -t 30 stop >&2 || true
	fi
	rm -rf "$dir"
}

cmd_pause() {
	local dir=${1:?usage: postgres.sh pause <dir>}
	dir=$(cd "$dir" && pwd -P)
	[[ -e $dir/$MARKER ]] || die "$dir was not created by postgres.sh start"
	cd "$dir"
	local bin
	bin=$(find_pg_bin) || die "pg_ctl not found"
	# fast: clients see their connections terminated (57P01), as in a real outage.
	as_owner "$bin/pg_ctl" -D "$dir/data" -m fast -w -t 60 stop >&2
}

cmd_resume() {
	local dir=${1:?usage: postgres.sh resume <dir>}
	dir=$(cd "$dir" && pwd -P)
	[[ -e $dir/$MARKER && -f $dir/port ]] || die "$dir was not created by postgres.sh start"
	cd "$dir"
	local bin
	bin=$(find_pg_bin) || die "pg_ctl not found"
	as_owner "$bin/pg_ctl" -D "$dir/data" -l "$dir/postgres.log" -o "-p $(cat "$dir/port")" -w -t 120 start >&2
}

cmd_reap() {
	local dir=${1:?usage: postgres.sh reap <dir> <pid>} pid=${2:?usage: postgres.sh reap <dir> <pid>}
	while kill -0 "$pid" 2>/dev/null; do sleep 1; done
	cmd_stop "$dir"
}

case "${1:-}" in
start) shift; cmd_start "$@" ;;
stop) shift; cmd_stop "$@" ;;
reap) shift; cmd_reap "$@" ;;
pause) shift; cmd_pause "$@" ;;
resume) shift; cmd_resume "$@" ;;
*) echo "usage: $0 {start <dir>|stop <dir>|reap <dir> <pid>|pause <dir>|resume <dir>}" >&2; exit 2 ;;
esac
