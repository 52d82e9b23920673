-- Back to the triggers and function of 0020 and 0021.
CREATE OR REPLACE FUNCTION instances_last_op() RETURNS trigger AS $$
BEGIN
    UPDATE instances SET last_op_type = NEW.type, last_op_state = NEW.state
    WHERE instance_id = NEW.instance_id AND NOT EXISTS (
        SELECT 1 FROM operations o WHERE o.instance_id = NEW.instance_id
        AND (o.created_at > NEW.created_at OR (o.created_at = NEW.created_at AND o.id > NEW.id)));
    RETURN NULL;
END
$$ LANGUAGE plpgsql;

DROP TRIGGER operations_last_op_insert ON operations;
DROP TRIGGER operations_last_op_update ON operations;
CREATE TRIGGER operations_last_op_insert AFTER INSERT ON operations
    FOR EACH ROW EXECUTE FUNCTION instances_last_op();
CREATE TRIGGER operations_last_op_update AFTER UPDATE OF state ON operations
    FOR EACH ROW WHEN (OLD.state IS DISTINCT FROM NEW.state) EXECUTE FUNCTION instances_last_op();

DROP TRIGGER operations_shoot_name_update ON operations;
CREATE TRIGGER operations_shoot_name_update AFTER UPDATE OF data ON operations
    FOR EACH ROW WHEN (NEW.type = 'provision' AND NEW.data IS DISTINCT FROM OLD.data) EXECUTE FUNCTION instances_shoot_name();
