-- An instance's newest operation is read ORDER BY created_at DESC, id DESC LIMIT 1 (last_operation,
-- the runtimes view): with id in the index the scan stops at the first row instead of sorting.
CREATE INDEX operations_instance_newest ON operations (instance_id, created_at, id);
DROP INDEX operations_instance_id_created_at;
