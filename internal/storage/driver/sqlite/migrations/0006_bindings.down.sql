DROP TABLE bindings;
