-- The table as the broker's migration 0005 left it, for the adoption test.
-- State of the embedded sandbox's stand-ins: one row per object or counter (internal/sandbox).
CREATE TABLE sandbox_objects (
    system     TEXT NOT NULL,
    kind       TEXT NOT NULL,
    object_key TEXT NOT NULL,
    value      TEXT NOT NULL,
    PRIMARY KEY (system, kind, object_key)
) STRICT;
