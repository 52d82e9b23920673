-- The stand-ins' state: one row per object or counter of a system, by kind and key
-- (internal/sandbox/durable). The broker's own migrations created this table before the sandbox
-- had a migration line of its own: this migration adopts it (its rows stay). The primary key is
-- byte-ordered (BINARY collation), which the prefix ranges rely on.
CREATE TABLE IF NOT EXISTS sandbox_objects (
    system     TEXT NOT NULL,
    kind       TEXT NOT NULL,
    object_key TEXT NOT NULL,
    value      TEXT NOT NULL,
    PRIMARY KEY (system, kind, object_key)
) STRICT;
