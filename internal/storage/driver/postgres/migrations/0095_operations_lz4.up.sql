-- An operation's row outgrows PostgreSQL's 2 KB TOAST threshold (data ~2.7 KB, progress ~0.8 KB,
-- the encrypted secrets), so the saves that rewrite its progress or data compress them again:
-- pglz took ~2.5% of PostgreSQL's CPU in the e2e bench (perf). lz4 compresses several times
-- faster. It needs a server built with lz4 (PostgreSQL 14+, --with-lz4, as the distributions'
-- packages are); without it the columns keep pglz. Values already stored keep their method.
DO $$
BEGIN
    EXECUTE 'ALTER TABLE operations ALTER COLUMN data SET COMPRESSION lz4, '
        || 'ALTER COLUMN progress SET COMPRESSION lz4, ALTER COLUMN secrets SET COMPRESSION lz4';
EXCEPTION WHEN feature_not_supported OR syntax_error THEN
    RAISE NOTICE 'operations keep pglz compression: %', SQLERRM;
END
$$;
