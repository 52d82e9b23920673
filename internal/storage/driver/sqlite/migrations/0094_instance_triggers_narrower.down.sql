-- Back to the triggers of 0020 and 0021.
DROP TRIGGER operations_last_op_insert;
DROP TRIGGER operations_last_op_update;

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

DROP TRIGGER operations_shoot_name_update;

CREATE TRIGGER operations_shoot_name_update AFTER UPDATE OF data ON operations
WHEN NEW.type = 'provision' AND NEW.data IS NOT OLD.data AND json_valid(NEW.data)
    AND json_extract(NEW.data, '$.shoot_name') IS NOT NULL
BEGIN
    UPDATE instances SET shoot_name = json_extract(NEW.data, '$.shoot_name')
    WHERE instance_id = NEW.instance_id AND shoot_name IS NOT json_extract(NEW.data, '$.shoot_name');
END;
