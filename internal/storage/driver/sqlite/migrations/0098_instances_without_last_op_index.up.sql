-- As PostgreSQL's migration 0098: no statement can use instances_last_op (the runtime state is
-- a CASE expression over the columns), and every change of an instance's newest operation's
-- state wrote it.
DROP INDEX IF EXISTS instances_last_op;
