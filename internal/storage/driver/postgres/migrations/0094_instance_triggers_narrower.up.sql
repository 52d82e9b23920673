-- The triggers that keep an instance's newest operation (0020) and shoot name (0021) on its row
-- ran far more often than they could change it (pg_stat_user_functions, e2e bench, 3,000
-- provisionings: instances_last_op 15,198 calls, 3.1 s; instances_shoot_name 27,463 calls,
-- 1.7 s; together ~16% of PostgreSQL's CPU):
-- - instances_last_op ran for the provisioner's operations too, whose instance_id is a runtime
--   ID that names no instance: half of its calls, each an UPDATE that matched nothing.
-- - instances_shoot_name ran on every change of a provisioning's data, parsing the whole
--   document each time. A provisioning records its shoot name once (Check_Runtime, only while
--   it has none, and it sets the instance's with it): the trigger now runs when the name first
--   appears in the data. The broker writes the data with encoding/json, which writes the key as
--   "shoot_name" and leaves it out while empty (omitempty).
-- - instances_last_op rewrote the instance (a new version in each of its ten indexes) even when
--   it held the operation's type and state already, as it does when the broker inserts an
--   instance with its first operation (sqlstore writes them on the instance's insert).
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

DROP TRIGGER operations_last_op_insert ON operations;
DROP TRIGGER operations_last_op_update ON operations;
CREATE TRIGGER operations_last_op_insert AFTER INSERT ON operations
    FOR EACH ROW WHEN (NEW.type NOT LIKE 'provisioner%') EXECUTE FUNCTION instances_last_op();
CREATE TRIGGER operations_last_op_update AFTER UPDATE OF state ON operations
    FOR EACH ROW WHEN (OLD.state IS DISTINCT FROM NEW.state AND NEW.type NOT LIKE 'provisioner%')
    EXECUTE FUNCTION instances_last_op();

DROP TRIGGER operations_shoot_name_update ON operations;
CREATE TRIGGER operations_shoot_name_update AFTER UPDATE OF data ON operations
    FOR EACH ROW WHEN (NEW.type = 'provision' AND strpos(NEW.data, '"shoot_name"') > 0
        AND (OLD.data IS NULL OR strpos(OLD.data, '"shoot_name"') = 0))
    EXECUTE FUNCTION instances_shoot_name();
