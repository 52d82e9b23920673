-- The engine rewrites an operation's row on every step; saves that keep the lease leave every
-- indexed column as it is, so PostgreSQL can write the new version in place (a HOT update, no
-- index entries) if its page has room. Rows grow with their progress (~1-3 KB), so 80% filled
-- pages often had none: half of the saves were not HOT. Applies to pages written from now on.
ALTER TABLE operations SET (fillfactor = 50);
