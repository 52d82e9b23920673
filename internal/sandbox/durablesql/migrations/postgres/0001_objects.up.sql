-- The stand-ins' state: one row per object or counter of a system, by kind and key
-- (internal/sandbox/durable). The broker's own migrations created this table before the sandbox
-- had a migration line of its own: this migration adopts it as they left it (its rows stay) and
-- brings it to the schema below, which a new database gets at once.
--
-- The key column is byte-ordered (COLLATE "C"): the primary key serves point reads and the prefix
-- ranges (Objects.Prefix) alike, whatever the database's collation. An object is rewritten by most
-- requests about it: room in each page lets the new version stay there (a HOT update).
CREATE TABLE IF NOT EXISTS sandbox_objects (
    system     TEXT NOT NULL,
    kind       TEXT NOT NULL,
    object_key TEXT COLLATE "C" NOT NULL,
    value      TEXT NOT NULL,
    PRIMARY KEY (system, kind, object_key)
) WITH (fillfactor = 70);
-- An adopted table of an older schema: the byte-order index its key column now replaces.
DROP INDEX IF EXISTS sandbox_objects_byte_order;
DO $$
BEGIN
    IF (SELECT c.collname FROM pg_attribute a JOIN pg_collation c ON c.oid = a.attcollation
        WHERE a.attrelid = 'sandbox_objects'::regclass AND a.attname = 'object_key') <> 'C' THEN
        ALTER TABLE sandbox_objects ALTER COLUMN object_key TYPE TEXT COLLATE "C";
    END IF;
END
$$;
ALTER TABLE sandbox_objects SET (fillfactor = 70);
-- Objects past the 2 KB TOAST threshold are compressed at each write: lz4 where the server has it.
DO $$
BEGIN
    EXECUTE 'ALTER TABLE sandbox_objects ALTER COLUMN value SET COMPRESSION lz4';
EXCEPTION WHEN feature_not_supported OR syntax_error THEN
    RAISE NOTICE 'sandbox_objects keep pglz compression: %', SQLERRM;
END
$$;
