-- Point reads of sandbox_objects (system, kind, object_key = $3) were planned on 0080's byte-order
-- index: its key column's collation ("C") is not the column's, so the key was no index condition
-- but a filter over every row of the kind (hundreds of buffers per read, growing with the kind).
-- The key column itself is byte-ordered now: the primary key serves point reads and the prefix
-- ranges (SandboxObjects.Prefix) alike, and the second index, written with every row, goes.
DROP INDEX sandbox_objects_byte_order;
ALTER TABLE sandbox_objects ALTER COLUMN object_key TYPE TEXT COLLATE "C";
-- An object is rewritten by most requests about it (its call counts) and a stand-in's call counts
-- by every request: room in each page lets the new version stay there (a HOT update, no index
-- entry), as for operations (0070).
ALTER TABLE sandbox_objects SET (fillfactor = 70);
