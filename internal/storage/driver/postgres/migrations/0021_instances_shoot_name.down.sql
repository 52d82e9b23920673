DROP INDEX instances_shoot_name;
DROP TRIGGER operations_shoot_name_update ON operations;
DROP TRIGGER operations_shoot_name_insert ON operations;
DROP FUNCTION instances_shoot_name();
ALTER TABLE instances DROP COLUMN shoot_name;
