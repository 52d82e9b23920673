ALTER TABLE runtimes DROP COLUMN allocation;
