DROP INDEX events_type_id;
CREATE INDEX events_type_id ON events (type, id);
