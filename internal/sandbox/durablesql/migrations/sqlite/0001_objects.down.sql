DROP TABLE IF EXISTS sandbox_objects;
