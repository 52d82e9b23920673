-- Times are INTEGER unix microseconds (UTC), so comparisons are numeric and exact.
CREATE TABLE instances (
    instance_id       TEXT PRIMARY KEY NOT NULL,
    runtime_id        TEXT NOT NULL DEFAULT '',
    global_account_id TEXT NOT NULL DEFAULT '',
    sub_account_id    TEXT NOT NULL DEFAULT '',
    service_id        TEXT NOT NULL DEFAULT '',
    plan_id           TEXT NOT NULL DEFAULT '',
    provider_region   TEXT NOT NULL DEFAULT '',
    dashboard_url     TEXT NOT NULL DEFAULT '',
    parameters        TEXT,
    secrets           BLOB,
    created_at        INTEGER NOT NULL,
    updated_at        INTEGER NOT NULL,
    version           INTEGER NOT NULL
) STRICT;

CREATE INDEX instances_global_account_id ON instances (global_account_id);
CREATE INDEX instances_sub_account_id ON instances (sub_account_id);
CREATE INDEX instances_runtime_id ON instances (runtime_id);

CREATE TABLE operations (
    id               TEXT PRIMARY KEY NOT NULL,
    instance_id      TEXT NOT NULL,
    type             TEXT NOT NULL,
    state            TEXT NOT NULL,
    description      TEXT NOT NULL DEFAULT '',
    created_at       INTEGER NOT NULL,
    updated_at       INTEGER NOT NULL,
    version          INTEGER NOT NULL,
    due_at           INTEGER,
    lease_owner      TEXT,
    lease_expires_at INTEGER,
    deadline         INTEGER,
    stage            TEXT NOT NULL DEFAULT '',
    progress         TEXT NOT NULL DEFAULT '{}',
    last_error       TEXT NOT NULL DEFAULT '',
    data             TEXT,
    secrets          BLOB
) STRICT;

CREATE INDEX operations_due_at ON operations (due_at) WHERE due_at IS NOT NULL;
CREATE INDEX operations_instance_id_created_at ON operations (instance_id, created_at);
CREATE INDEX operations_state_type ON operations (state, type);

CREATE TABLE events (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    operation_id TEXT NOT NULL,
    instance_id  TEXT NOT NULL DEFAULT '',
    step         TEXT NOT NULL DEFAULT '',
    type         TEXT NOT NULL,
    message      TEXT NOT NULL DEFAULT '',
    duration_us  INTEGER NOT NULL DEFAULT 0,
    wait_us      INTEGER NOT NULL DEFAULT 0,
    created_at   INTEGER NOT NULL
) STRICT;

CREATE INDEX events_operation_id ON events (operation_id);
CREATE INDEX events_instance_id ON events (instance_id);
