-- instances_last_op (last_op_state, last_op_type) served no statement: the only reads of the
-- columns are the runtime state's CASE expression (GET /runtimes' state filter and sort, the
-- counts), which no index on the columns can serve (EXPLAIN: a filter over the created_at index
-- or a scan; pg_stat_user_indexes: one scan in a run of 2,000 provisionings, 0 in the fleet
-- bench). Yet every change of an instance's newest operation's state wrote it, and, the
-- columns being indexed, could never be a HOT update: a new version in each of the ten indexes.
-- Without it, the state's change touches no index; fillfactor 80 leaves the room on an
-- instance's page that a HOT update needs (new pages only; instances are ~1 KB, a few per page).
DROP INDEX IF EXISTS instances_last_op;
ALTER TABLE instances SET (fillfactor = 80);
