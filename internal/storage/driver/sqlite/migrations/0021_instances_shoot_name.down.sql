DROP INDEX instances_shoot_name;
DROP TRIGGER operations_shoot_name_update;
DROP TRIGGER operations_shoot_name_insert;
ALTER TABLE instances DROP COLUMN shoot_name;
