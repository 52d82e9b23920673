DROP INDEX operations_due_at_id;
CREATE INDEX operations_due_at ON operations (due_at) WHERE due_at IS NOT NULL;
