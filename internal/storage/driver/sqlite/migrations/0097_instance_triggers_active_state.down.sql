-- Back to the triggers of 0094 (and 0021's insert trigger). Instances whose newest operation is
-- pending keep 'in progress' until its next change: both read as the same state.
DROP TRIGGER operations_last_op_insert;
DROP TRIGGER operations_last_op_update;
DROP TRIGGER operations_shoot_name_insert;

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

CREATE TRIGGER operations_shoot_name_insert AFTER INSERT ON operations
WHEN NEW.type = 'provision' AND json_valid(NEW.data) AND json_extract(NEW.data, '$.shoot_name') IS NOT NULL
BEGIN
    UPDATE instances SET shoot_name = json_extract(NEW.data, '$.shoot_name') WHERE instance_id = NEW.instance_id;
END;
