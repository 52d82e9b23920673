-- PostgreSQL's 0093 has autovacuum analyze operations sooner; SQLite has no autovacuum
-- statistics. This keeps both dialects' schema versions equal.
SELECT 1;
