# Tests and benchmarks run against a real PostgreSQL server:
# scripts/with-postgres.sh reuses $KEB_TEST_DATABASE_URL if set, otherwise it
# starts a throwaway cluster for the duration of the command.

.PHONY: test bench bench-engine vet fmt build run

test:
	bash scripts/with-postgres.sh go test -count=1 -timeout 30m ./...

# Umbrella target; further benchmarks get added as dependencies.
bench: bench-engine

bench-engine:
	bash scripts/with-postgres.sh go run ./internal/process/bench

vet:
	go vet ./...

# Fails (listing the files) if anything is not gofmt-formatted.
fmt:
	@out=$$(gofmt -l .); if [ -n "$$out" ]; then echo "gofmt needed on:"; echo "$$out"; exit 1; fi

build:
	go build ./...

run:
	go run ./cmd/broker
