# Tests and benchmarks run against a real PostgreSQL server:
# scripts/with-postgres.sh reuses $KEB_TEST_DATABASE_URL if set, otherwise it
# starts a throwaway cluster for the duration of the command.
# Tests also get a real Kubernetes API server (kube-apiserver + etcd):
# scripts/with-kube.sh reuses $KEB_TEST_KUBECONFIG if set, otherwise it starts
# a throwaway one. kube-apiserver is built from source once (several minutes)
# and cached in ${KEB_CACHE_DIR:-$HOME/.cache/keb}/bin.
# The Swagger UI test drives a headless Chromium: scripts/with-chromium.sh finds
# it (or $KEB_CHROMIUM) and installs Debian's chromium when it is missing.
# The Helm chart's test checks its alert rules with promtool: scripts/with-promtool.sh finds it
# (or $KEB_PROMTOOL) and installs Debian's prometheus package, which ships it, when it is missing.
# Module tests start their own OCI registries (internal/module/moduletest, scripts/registry.sh:
# Debian's docker-registry on random loopback ports, with and without basic auth and TLS);
# the script installs docker-registry, htpasswd, openssl and curl with apt-get if missing.

.PHONY: test bench bench-engine bench-storage bench-runtimes bench-osb bench-e2e bench-fleet bench-agent vet fmt build run kube-apiserver

test:
	bash scripts/registry.sh install
	bash scripts/with-postgres.sh bash scripts/with-kube.sh bash scripts/with-chromium.sh bash scripts/with-promtool.sh go test -count=1 -timeout 30m ./...

# Builds (or finds cached) the kube-apiserver binary used by the tests.
kube-apiserver:
	bash scripts/kube.sh build

# Umbrella target; further benchmarks get added as dependencies.
bench: bench-engine bench-storage bench-runtimes bench-osb bench-e2e bench-fleet bench-agent

# The engine against River on one throwaway PostgreSQL (medians of alternating rounds, ratio),
# and the engine's SQLite figure in the same rounds. tools/bench/river is its own module.
bench-engine:
	bash scripts/with-postgres.sh sh -c 'cd tools/bench/river && go run . -sqlite'

# Go benchmarks of the PostgreSQL store (SaveProgress, an instance's newest operation), and of
# decoding an operation's data on a claim (fastjson against encoding/json).
bench-storage:
	bash scripts/with-postgres.sh go test -run '^$$' -bench . -benchmem ./internal/storage/... ./internal/fastjson/

# GET /runtimes with every filter against 10,000 seeded instances, on PostgreSQL and SQLite.
bench-runtimes:
	bash scripts/with-postgres.sh go test -run '^$$' -bench Runtimes -benchtime 50x ./internal/operator/runtimesbench/

# The OSB read path at c64 against a bare brokerapi v10 broker in the same run: GET /v2/catalog,
# and last_operation on SQLite and PostgreSQL (medians of 3 alternating 3 s rounds; rps, p99, ratio).
bench-osb:
	bash scripts/with-postgres.sh go run ./tools/bench/osb

# Provisionings/s end to end: the real broker (embedded sandbox, fastest simulated clusters) on
# SQLite and PostgreSQL, with engine writes, events and rows written per provisioning (target 250/s).
bench-e2e:
	bash scripts/with-postgres.sh go run ./tools/bench/e2e -rounds 3 -reference

# The real broker binary on PostgreSQL with 20,000 provisionings in flight waiting on 30-minute
# simulated clusters: due lag, RSS, step runs/s, events and database growth (tools/bench/fleet).
bench-fleet:
	bash scripts/with-postgres.sh go run ./tools/bench/fleet

# The Runtime Agent on a real kube-apiserver with the sandbox's Connector and Director over TLS:
# first sync (first-sync-s) and a pass with no change (pass-s) for 100 and 1,000 applications.
bench-agent:
	bash scripts/with-kube.sh go test -run '^$$' -bench AgentSync -benchtime 5x -timeout 30m ./internal/runtimeagent/

vet:
	go vet ./...

# Fails (listing the files) if anything is not gofmt-formatted.
fmt:
	@out=$$(gofmt -l .); if [ -n "$$out" ]; then echo "gofmt needed on:"; echo "$$out"; exit 1; fi

build:
	go build ./...

run:
	go run ./cmd/broker
