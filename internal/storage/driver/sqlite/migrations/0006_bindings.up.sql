-- OSB service bindings: the credentials handed out (encrypted) and the request that made them.
CREATE TABLE bindings (
    id          TEXT PRIMARY KEY,
    instance_id TEXT NOT NULL,
    request     TEXT NOT NULL,
    secrets     BLOB,
    created_at  INTEGER NOT NULL
);

CREATE INDEX bindings_instance ON bindings (instance_id);
