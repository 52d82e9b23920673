-- The stand-ins' objects past PostgreSQL's 2 KB TOAST threshold (the reconciler's cluster with its
-- kubeconfig and components, ~4.8 KB; a Service Manager binding, ~1.8 KB with its credentials)
-- were compressed with pglz at each write: ~1% of PostgreSQL's CPU in the e2e bench (perf). lz4
-- as for operations (0095), where the server has it.
DO $$
BEGIN
    EXECUTE 'ALTER TABLE sandbox_objects ALTER COLUMN value SET COMPRESSION lz4';
EXCEPTION WHEN feature_not_supported OR syntax_error THEN
    RAISE NOTICE 'sandbox_objects keep pglz compression: %', SQLERRM;
END
$$;
