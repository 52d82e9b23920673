-- The type-filtered event feed (failures, waits, skipped steps, newest first) needs (type, id) to
-- avoid scanning every event backwards for rare types; "succeeded", one event per step run and
-- nearly all events, is found at once by the primary key read backwards. Leaving it out of the
-- index saves one index entry per step transition. A query for another type (a constant at
-- plan time) implies the predicate, so the planner uses this index as before.
DROP INDEX events_type_id;
CREATE INDEX events_type_id ON events (type, id) WHERE type <> 'succeeded';
