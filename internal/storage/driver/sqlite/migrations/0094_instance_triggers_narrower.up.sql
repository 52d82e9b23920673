-- As PostgreSQL's migration 0094: an instance's newest operation is not looked for on the
-- provisioner's operations (their instance_id is a runtime ID), and a provisioning's shoot
-- name is copied to its instance when it first appears in the data (it is recorded once),
-- instead of on every change of the data; and an instance that holds the operation's type and
-- state already is not rewritten.
DROP TRIGGER operations_last_op_insert;
DROP TRIGGER operations_last_op_update;

CREATE TRIGGER operations_last_op_insert AFTER INSERT ON operations
WHEN NEW.type NOT LIKE 'provisioner%'
BEGIN
    UPDATE instances SET last_op_type = NEW.type, last_op_state = NEW.state
    WHERE instance_id = NEW.instance_id AND (last_op_type <> NEW.type OR last_op_state <> NEW.state) AND NOT EXISTS (
        SELECT 1 FROM operations o WHERE o.instance_id = NEW.instance_id
        AND (o.created_at > NEW.created_at OR (o.created_at = NEW.created_at AND o.id > NEW.id)));
END;

CREATE TRIGGER operations_last_op_update AFTER UPDATE OF state ON operations
WHEN OLD.state IS NOT NEW.state AND NEW.type NOT LIKE 'provisioner%'
BEGIN
    UPDATE instances SET last_op_type = NEW.type, last_op_state = NEW.state
    WHERE instance_id = NEW.instance_id AND (last_op_type <> NEW.type OR last_op_state <> NEW.state) AND NOT EXISTS (
        SELECT 1 FROM operations o WHERE o.instance_id = NEW.instance_id
        AND (o.created_at > NEW.created_at OR (o.created_at = NEW.created_at AND o.id > NEW.id)));
END;

DROP TRIGGER operations_shoot_name_update;

CREATE TRIGGER operations_shoot_name_update AFTER UPDATE OF data ON operations
WHEN NEW.type = 'provision' AND instr(NEW.data, '"shoot_name"') > 0
    AND (OLD.data IS NULL OR instr(OLD.data, '"shoot_name"') = 0) AND json_valid(NEW.data)
    AND json_extract(NEW.data, '$.shoot_name') IS NOT NULL
BEGIN
    UPDATE instances SET shoot_name = json_extract(NEW.data, '$.shoot_name')
    WHERE instance_id = NEW.instance_id AND shoot_name IS NOT json_extract(NEW.data, '$.shoot_name');
END;
