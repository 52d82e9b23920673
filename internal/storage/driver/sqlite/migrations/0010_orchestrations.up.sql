-- Orchestrations: upgrades across the fleet, one row per selected runtime. A runtime's row holds
-- the ID of the engine operation that upgrades it (chosen when selected, renewed on retry): the
-- scheduler inserts that operation and marks the row started in one transaction.
CREATE TABLE orchestrations (
    id          TEXT PRIMARY KEY,
    type        TEXT NOT NULL,
    state       TEXT NOT NULL,
    description TEXT NOT NULL DEFAULT '',
    parameters  TEXT NOT NULL,
    created_at  INTEGER NOT NULL,
    updated_at  INTEGER NOT NULL
);

CREATE INDEX orchestrations_state_created_at ON orchestrations (state, created_at);
CREATE INDEX orchestrations_created_at ON orchestrations (created_at);

CREATE TABLE orchestration_operations (
    orchestration_id  TEXT NOT NULL,
    instance_id       TEXT NOT NULL,
    runtime_id        TEXT NOT NULL DEFAULT '',
    global_account_id TEXT NOT NULL DEFAULT '',
    sub_account_id    TEXT NOT NULL DEFAULT '',
    region            TEXT NOT NULL DEFAULT '',
    plan_id           TEXT NOT NULL DEFAULT '',
    seq               INTEGER NOT NULL,
    operation_id      TEXT NOT NULL UNIQUE,
    state             TEXT NOT NULL,
    description       TEXT NOT NULL DEFAULT '',
    attempts          INTEGER NOT NULL DEFAULT 0,
    due_at            INTEGER NOT NULL,
    started_at        INTEGER,
    created_at        INTEGER NOT NULL,
    updated_at        INTEGER NOT NULL,
    PRIMARY KEY (orchestration_id, instance_id)
);

CREATE INDEX orchestration_operations_due ON orchestration_operations (orchestration_id, state, due_at);
CREATE INDEX orchestration_operations_seq ON orchestration_operations (orchestration_id, seq);
