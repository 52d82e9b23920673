-- PostgreSQL's 0080 indexes the sandbox's keys in byte order; SQLite's primary key already is
-- (BINARY collation). This keeps both dialects' schema versions equal.
SELECT 1;
