CREATE TABLE instances (
    instance_id       TEXT PRIMARY KEY,
    runtime_id        TEXT NOT NULL DEFAULT '',
    global_account_id TEXT NOT NULL DEFAULT '',
    sub_account_id    TEXT NOT NULL DEFAULT '',
    service_id        TEXT NOT NULL DEFAULT '',
    plan_id           TEXT NOT NULL DEFAULT '',
    provider_region   TEXT NOT NULL DEFAULT '',
    dashboard_url     TEXT NOT NULL DEFAULT '',
    parameters        TEXT,
    secrets           BYTEA,
    created_at        TIMESTAMPTZ NOT NULL,
    updated_at        TIMESTAMPTZ NOT NULL,
    version           BIGINT NOT NULL
);

CREATE INDEX instances_global_account_id ON instances (global_account_id);
CREATE INDEX instances_sub_account_id ON instances (sub_account_id);
CREATE INDEX instances_runtime_id ON instances (runtime_id);

-- fillfactor leaves room for HOT updates: operations are rewritten on every step.
CREATE TABLE operations (
    id               TEXT PRIMARY KEY,
    instance_id      TEXT NOT NULL,
    type             TEXT NOT NULL,
    state            TEXT NOT NULL,
    description      TEXT NOT NULL DEFAULT '',
    created_at       TIMESTAMPTZ NOT NULL,
    updated_at       TIMESTAMPTZ NOT NULL,
    version          BIGINT NOT NULL,
    due_at           TIMESTAMPTZ,
    lease_owner      TEXT,
    lease_expires_at TIMESTAMPTZ,
    deadline         TIMESTAMPTZ,
    stage            TEXT NOT NULL DEFAULT '',
    progress         TEXT NOT NULL DEFAULT '{}',
    last_error       TEXT NOT NULL DEFAULT '',
    data             TEXT,
    secrets          BYTEA
) WITH (fillfactor = 80);

CREATE INDEX operations_due_at ON operations (due_at) WHERE due_at IS NOT NULL;
CREATE INDEX operations_instance_id_created_at ON operations (instance_id, created_at);
CREATE INDEX operations_state_type ON operations (state, type);

CREATE TABLE events (
    id           BIGSERIAL PRIMARY KEY,
    operation_id TEXT NOT NULL,
    instance_id  TEXT NOT NULL DEFAULT '',
    step         TEXT NOT NULL DEFAULT '',
    type         TEXT NOT NULL,
    message      TEXT NOT NULL DEFAULT '',
    duration_us  BIGINT NOT NULL DEFAULT 0,
    wait_us      BIGINT NOT NULL DEFAULT 0,
    created_at   TIMESTAMPTZ NOT NULL
);

CREATE INDEX events_operation_id ON events (operation_id);
CREATE INDEX events_instance_id ON events (instance_id);
