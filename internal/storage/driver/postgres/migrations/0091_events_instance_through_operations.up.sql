-- Every step transition inserts an event, and each index of events is one more entry to write
-- per transition. An instance's events are its operations' events (the store fills an event's
-- instance from its operation), so ListEvents finds them through operations' instance index
-- and events_operation_id; events_instance_id served nothing else.
DROP INDEX events_instance_id;
