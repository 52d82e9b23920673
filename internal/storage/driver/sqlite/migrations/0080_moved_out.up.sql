-- This version created or changed a table of a component that now keeps its tables in a
-- migration line of its own (which adopts them where this line created them). The version stays
-- so that the schema versions go on from here as before.
SELECT 1;
