-- PostgreSQL's 0096 compresses the stand-ins' objects with lz4; SQLite stores them uncompressed.
-- This keeps both dialects' schema versions equal.
SELECT 1;
