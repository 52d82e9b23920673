-- PostgreSQL's 0070 leaves room in operations' pages for in-place (HOT) updates; SQLite has no
-- such setting. This keeps both dialects' schema versions equal.
SELECT 1;
