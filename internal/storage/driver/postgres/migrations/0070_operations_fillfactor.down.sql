ALTER TABLE operations SET (fillfactor = 80);
