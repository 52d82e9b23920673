-- The sandbox's shared lookups read keys by prefix (SandboxObjects.Prefix) as a byte-ordered range:
-- this index serves it whatever the database's collation (the primary key follows the collation).
CREATE INDEX sandbox_objects_byte_order ON sandbox_objects (system, kind, object_key COLLATE "C");
