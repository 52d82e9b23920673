-- Runtimes of the embedded provisioner; their operations live in operations (instance_id = runtime id).
CREATE TABLE runtimes (
    id                 TEXT PRIMARY KEY,
    tenant             TEXT NOT NULL,
    name               TEXT NOT NULL,
    backend            TEXT NOT NULL DEFAULT '',
    compass_runtime_id TEXT NOT NULL DEFAULT '',
    config             TEXT,
    secrets            BYTEA,
    deleted            BOOLEAN NOT NULL DEFAULT FALSE,
    created_at         TIMESTAMPTZ NOT NULL,
    updated_at         TIMESTAMPTZ NOT NULL,
    version            BIGINT NOT NULL
);

CREATE INDEX runtimes_tenant ON runtimes (tenant);
