CREATE INDEX events_instance_id ON events (instance_id);
