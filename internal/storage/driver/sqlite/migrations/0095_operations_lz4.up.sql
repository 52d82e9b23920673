-- PostgreSQL's 0095 compresses operations' payload with lz4; SQLite stores it uncompressed.
-- This keeps both dialects' schema versions equal.
SELECT 1;
