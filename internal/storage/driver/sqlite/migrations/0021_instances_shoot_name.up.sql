-- The cluster (shoot) name a provisioning recorded, kept on the instance so GET /runtimes
-- filters by it through an index instead of reading every operation's data.
ALTER TABLE instances ADD COLUMN shoot_name TEXT NOT NULL DEFAULT '';

UPDATE instances SET shoot_name = COALESCE((
    SELECT json_extract(o.data, '$.shoot_name') FROM operations o
    WHERE o.instance_id = instances.instance_id AND o.type = 'provision' AND json_valid(o.data)
      AND json_extract(o.data, '$.shoot_name') IS NOT NULL
    ORDER BY o.created_at DESC, o.id DESC LIMIT 1), '');

CREATE TRIGGER operations_shoot_name_insert AFTER INSERT ON operations
WHEN NEW.type = 'provision' AND json_valid(NEW.data) AND json_extract(NEW.data, '$.shoot_name') IS NOT NULL
BEGIN
    UPDATE instances SET shoot_name = json_extract(NEW.data, '$.shoot_name') WHERE instance_id = NEW.instance_id;
END;

CREATE TRIGGER operations_shoot_name_update AFTER UPDATE OF data ON operations
WHEN NEW.type = 'provision' AND NEW.data IS NOT OLD.data AND json_valid(NEW.data)
    AND json_extract(NEW.data, '$.shoot_name') IS NOT NULL
BEGIN
    UPDATE instances SET shoot_name = json_extract(NEW.data, '$.shoot_name')
    WHERE instance_id = NEW.instance_id AND shoot_name IS NOT json_extract(NEW.data, '$.shoot_name');
END;

CREATE INDEX instances_shoot_name ON instances (shoot_name);
