-- Singleton locks (the orchestration scheduler, the lifecycle jobs) as leased rows: a holder
-- renews its lease; one that hangs loses the lock when the lease expires. A session advisory
-- lock stayed with a hung holder whose connection was open. (SQLite keeps singletons in its one
-- process; the table keeps the schemas alike.)
CREATE TABLE singleton_leases (
    name       TEXT PRIMARY KEY,
    holder     TEXT NOT NULL,
    expires_at TIMESTAMPTZ NOT NULL
);

-- Readiness probes a write here (a page-sized row, rolled back): a full disk fails it where a
-- ping and reads still succeed.
CREATE TABLE write_probes (
    id      TEXT PRIMARY KEY,
    payload BYTEA NOT NULL
);
