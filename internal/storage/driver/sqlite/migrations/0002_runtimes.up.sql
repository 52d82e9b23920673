-- Runtimes of the embedded provisioner; their operations live in operations (instance_id = runtime id).
CREATE TABLE runtimes (
    id                 TEXT PRIMARY KEY NOT NULL,
    tenant             TEXT NOT NULL,
    name               TEXT NOT NULL,
    backend            TEXT NOT NULL DEFAULT '',
    compass_runtime_id TEXT NOT NULL DEFAULT '',
    config             TEXT,
    secrets            BLOB,
    deleted            INTEGER NOT NULL DEFAULT 0,
    created_at         INTEGER NOT NULL,
    updated_at         INTEGER NOT NULL,
    version            INTEGER NOT NULL
) STRICT;

CREATE INDEX runtimes_tenant ON runtimes (tenant);
