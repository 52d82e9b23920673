DROP TABLE events;
DROP TABLE operations;
DROP TABLE instances;
