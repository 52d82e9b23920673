-- As PostgreSQL's migration 0097: an instance keeps its newest operation's pending state as in
-- progress (a runtime's state is the same for both), so an operation's first step does not
-- rewrite the instance; and a provisioning's data is parsed on its insert only when it holds a
-- shoot name.
DROP TRIGGER operations_last_op_insert;
DROP TRIGGER operations_last_op_update;
DROP TRIGGER operations_shoot_name_insert;

CREATE TRIGGER operations_last_op_insert AFTER INSERT ON operations
WHEN NEW.type NOT LIKE 'provisioner%'
BEGIN
    UPDATE instances SET last_op_type = NEW.type,
        last_op_state = CASE NEW.state WHEN 'pending' THEN 'in progress' ELSE NEW.state END
    WHERE instance_id = NEW.instance_id AND (last_op_type <> NEW.type
        OR last_op_state <> CASE NEW.state WHEN 'pending' THEN 'in progress' ELSE NEW.state END)
    AND NOT EXISTS (
        SELECT 1 FROM operations o WHERE o.instance_id = NEW.instance_id
        AND (o.created_at > NEW.created_at OR (o.created_at = NEW.created_at AND o.id > NEW.id)));
END;

CREATE TRIGGER operations_last_op_update AFTER UPDATE OF state ON operations
WHEN OLD.state IS NOT NEW.state AND NEW.type NOT LIKE 'provisioner%'
    AND NOT (OLD.state = 'pending' AND NEW.state = 'in progress')
BEGIN
    UPDATE instances SET last_op_type = NEW.type,
        last_op_state = CASE NEW.state WHEN 'pending' THEN 'in progress' ELSE NEW.state END
    WHERE instance_id = NEW.instance_id AND (last_op_type <> NEW.type
        OR last_op_state <> CASE NEW.state WHEN 'pending' THEN 'in progress' ELSE NEW.state END)
    AND NOT EXISTS (
        SELECT 1 FROM operations o WHERE o.instance_id = NEW.instance_id
        AND (o.created_at > NEW.created_at OR (o.created_at = NEW.created_at AND o.id > NEW.id)));
END;

CREATE TRIGGER operations_shoot_name_insert AFTER INSERT ON operations
WHEN NEW.type = 'provision' AND instr(NEW.data, '"shoot_name"') > 0 AND json_valid(NEW.data)
    AND json_extract(NEW.data, '$.shoot_name') IS NOT NULL
BEGIN
    UPDATE instances SET shoot_name = json_extract(NEW.data, '$.shoot_name') WHERE instance_id = NEW.instance_id;
END;

UPDATE instances SET last_op_state = 'in progress' WHERE last_op_state = 'pending';
