-- Nothing to undo: the up migration is a placeholder (see it).
SELECT 1;
