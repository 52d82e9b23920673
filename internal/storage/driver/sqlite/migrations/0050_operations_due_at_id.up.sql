-- Claims take the first due operations in (due_at, id) order. On due_at alone PostgreSQL sorted
-- every run of candidates (an incremental sort reads at least 32 rows and visits each in the
-- table) to take the few a claim wants; on (due_at, id) it reads them in order and stops. It
-- replaces the due_at index (NextDueAt uses its first column), so a save maintains no more
-- indexes than before. Only active operations have a due time, so the index holds only those.
DROP INDEX operations_due_at;
CREATE INDEX operations_due_at_id ON operations (due_at, id) WHERE due_at IS NOT NULL;
