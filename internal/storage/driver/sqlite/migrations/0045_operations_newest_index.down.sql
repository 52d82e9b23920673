CREATE INDEX operations_instance_id_created_at ON operations (instance_id, created_at);
DROP INDEX operations_instance_newest;
