-- The stage of the step an event is about (the console groups a timeline's bars by stage).
-- Rows written before it have none.
ALTER TABLE events ADD COLUMN stage TEXT NOT NULL DEFAULT '';
