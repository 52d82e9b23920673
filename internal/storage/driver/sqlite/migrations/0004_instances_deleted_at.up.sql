-- Deprovisioned instances are archived (kept with their operations), not deleted.
ALTER TABLE instances ADD COLUMN deleted_at INTEGER;
