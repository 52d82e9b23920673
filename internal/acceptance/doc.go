// Package acceptance runs the broker end to end through the OSB API against the sandbox's
// stand-ins of every external system: the seed's step lists and, on the broker's own binary
// (./cmd/broker, built once per run, with its embedded sandbox driven through the sandbox's admin
// API), issue 9's reliability list: kill -9 and restart mid-run on SQLite and PostgreSQL, lost
// responses on every system, a system failing for good, and PostgreSQL stopped while operations
// run. The figures each run measures are logged (go test -v).
package acceptance
