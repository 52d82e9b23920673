-- Back to the function and triggers of 0094 (and 0021's insert trigger). Instances whose newest
-- operation is pending keep 'in progress' until its next change: both read as the same state.
CREATE OR REPLACE FUNCTION instances_last_op() RETURNS trigger AS $$
BEGIN
    UPDATE instances SET last_op_type = NEW.type, last_op_state = NEW.state
    WHERE instance_id = NEW.instance_id AND (last_op_type <> NEW.type OR last_op_state <> NEW.state)
    AND NOT EXISTS (
        SELECT 1 FROM operations o WHERE o.instance_id = NEW.instance_id
        AND (o.created_at > NEW.created_at OR (o.created_at = NEW.created_at AND o.id > NEW.id)));
    RETURN NULL;
END
$$ LANGUAGE plpgsql;

DROP TRIGGER operations_last_op_update ON operations;
CREATE TRIGGER operations_last_op_update AFTER UPDATE OF state ON operations
    FOR EACH ROW WHEN (OLD.state IS DISTINCT FROM NEW.state AND NEW.type NOT LIKE 'provisioner%')
    EXECUTE FUNCTION instances_last_op();

DROP TRIGGER operations_shoot_name_insert ON operations;
CREATE TRIGGER operations_shoot_name_insert AFTER INSERT ON operations
    FOR EACH ROW WHEN (NEW.type = 'provision') EXECUTE FUNCTION instances_shoot_name();
