-- The table as the broker's migrations 0005 and 0080 left it (before 0090), for the adoption test.
-- State of the embedded sandbox's stand-ins: one row per object or counter (internal/sandbox).
CREATE TABLE sandbox_objects (
    system     TEXT NOT NULL,
    kind       TEXT NOT NULL,
    object_key TEXT NOT NULL,
    value      TEXT NOT NULL,
    PRIMARY KEY (system, kind, object_key)
);
-- The sandbox's shared lookups read keys by prefix (SandboxObjects.Prefix) as a byte-ordered range:
-- this index serves it whatever the database's collation (the primary key follows the collation).
CREATE INDEX sandbox_objects_byte_order ON sandbox_objects (system, kind, object_key COLLATE "C");
