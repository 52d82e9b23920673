-- PostgreSQL's 0090 makes the sandbox's keys byte-ordered in the primary key; SQLite's primary key
-- already is (BINARY collation). This keeps both dialects' schema versions equal.
SELECT 1;
