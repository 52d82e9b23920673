-- The cluster (shoot) name a provisioning recorded, kept on the instance so GET /runtimes
-- filters by it through an index instead of reading every operation's data.
ALTER TABLE instances ADD COLUMN shoot_name TEXT NOT NULL DEFAULT '';

UPDATE instances SET shoot_name = COALESCE((
    SELECT o.data::jsonb ->> 'shoot_name' FROM operations o
    WHERE o.instance_id = instances.instance_id AND o.type = 'provision' AND o.data IS NOT NULL AND o.data <> ''
      AND o.data::jsonb ->> 'shoot_name' IS NOT NULL
    ORDER BY o.created_at DESC, o.id DESC LIMIT 1), '');

-- Operation data is always JSON written by the broker (or NULL).
CREATE FUNCTION instances_shoot_name() RETURNS trigger AS $$
DECLARE
    shoot TEXT;
BEGIN
    IF NEW.data IS NULL OR NEW.data = '' THEN
        RETURN NULL;
    END IF;
    shoot := NEW.data::jsonb ->> 'shoot_name';
    IF shoot IS NOT NULL THEN
        UPDATE instances SET shoot_name = shoot WHERE instance_id = NEW.instance_id AND shoot_name IS DISTINCT FROM shoot;
    END IF;
    RETURN NULL;
END
$$ LANGUAGE plpgsql;

CREATE TRIGGER operations_shoot_name_insert AFTER INSERT ON operations
    FOR EACH ROW WHEN (NEW.type = 'provision') EXECUTE FUNCTION instances_shoot_name();
CREATE TRIGGER operations_shoot_name_update AFTER UPDATE OF data ON operations
    FOR EACH ROW WHEN (NEW.type = 'provision' AND NEW.data IS DISTINCT FROM OLD.data) EXECUTE FUNCTION instances_shoot_name();

CREATE INDEX instances_shoot_name ON instances (shoot_name);
