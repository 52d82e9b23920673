-- Lifecycle of instances (issue 13): expiry, the newest operation of each instance kept on its
-- row so GET /runtimes filters and pages states in the database, and the re-trigger of
-- deprovisioning steps left executed but not completed.
ALTER TABLE instances ADD COLUMN expired_at INTEGER;
ALTER TABLE instances ADD COLUMN last_op_type TEXT NOT NULL DEFAULT '';
ALTER TABLE instances ADD COLUMN last_op_state TEXT NOT NULL DEFAULT '';

-- The newest operation (created_at, then id: the order of ListOperations) decides the state.
UPDATE instances SET (last_op_type, last_op_state) = (
    SELECT o.type, o.state FROM operations o WHERE o.instance_id = instances.instance_id
    ORDER BY o.created_at DESC, o.id DESC LIMIT 1)
WHERE EXISTS (SELECT 1 FROM operations o WHERE o.instance_id = instances.instance_id);

CREATE TRIGGER operations_last_op_insert AFTER INSERT ON operations
BEGIN
    UPDATE instances SET last_op_type = NEW.type, last_op_state = NEW.state
    WHERE instance_id = NEW.instance_id AND NOT EXISTS (
        SELECT 1 FROM operations o WHERE o.instance_id = NEW.instance_id
        AND (o.created_at > NEW.created_at OR (o.created_at = NEW.created_at AND o.id > NEW.id)));
END;

CREATE TRIGGER operations_last_op_update AFTER UPDATE OF state ON operations
WHEN OLD.state IS NOT NEW.state
BEGIN
    UPDATE instances SET last_op_type = NEW.type, last_op_state = NEW.state
    WHERE instance_id = NEW.instance_id AND NOT EXISTS (
        SELECT 1 FROM operations o WHERE o.instance_id = NEW.instance_id
        AND (o.created_at > NEW.created_at OR (o.created_at = NEW.created_at AND o.id > NEW.id)));
END;

CREATE INDEX instances_created_at ON instances (created_at, instance_id);
CREATE INDEX instances_plan_region ON instances (plan_id, provider_region);
CREATE INDEX instances_last_op ON instances (last_op_state, last_op_type);

-- One row per deprovisioning (or suspension) that left steps not completed: the re-trigger job
-- runs them again until done or too old (then they are reported as orphaned resources).
CREATE TABLE retriggers (
    origin_id         TEXT PRIMARY KEY NOT NULL,
    instance_id       TEXT NOT NULL,
    origin_type       TEXT NOT NULL,
    steps             TEXT NOT NULL,
    state             TEXT NOT NULL,
    attempts          INTEGER NOT NULL DEFAULT 0,
    last_operation_id TEXT NOT NULL DEFAULT '',
    last_error        TEXT NOT NULL DEFAULT '',
    next_at           INTEGER NOT NULL,
    created_at        INTEGER NOT NULL,
    updated_at        INTEGER NOT NULL
) STRICT;

CREATE INDEX retriggers_state_next_at ON retriggers (state, next_at);

-- The operations the job created: they are not origins of their own.
CREATE TABLE retrigger_operations (
    operation_id TEXT PRIMARY KEY NOT NULL,
    origin_id    TEXT NOT NULL
) STRICT;
