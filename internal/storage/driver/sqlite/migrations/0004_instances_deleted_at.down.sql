ALTER TABLE instances DROP COLUMN deleted_at;
