-- Slots of static pools' hosts given to runtimes (infrastructure/static).
CREATE TABLE static_allocations (
    pool       TEXT NOT NULL,
    runtime_id TEXT NOT NULL,
    host       TEXT NOT NULL,
    slots      INTEGER NOT NULL CHECK (slots > 0),
    created_at INTEGER NOT NULL,
    PRIMARY KEY (pool, runtime_id)
) STRICT;

CREATE INDEX static_allocations_pool_host ON static_allocations (pool, host);
