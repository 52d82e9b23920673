-- Back to the default method (values already stored keep theirs); a server without SET
-- COMPRESSION never changed it.
DO $$
BEGIN
    EXECUTE 'ALTER TABLE operations ALTER COLUMN data SET COMPRESSION default, '
        || 'ALTER COLUMN progress SET COMPRESSION default, ALTER COLUMN secrets SET COMPRESSION default';
EXCEPTION WHEN feature_not_supported OR syntax_error THEN
    RAISE NOTICE 'operations keep their compression: %', SQLERRM;
END
$$;
