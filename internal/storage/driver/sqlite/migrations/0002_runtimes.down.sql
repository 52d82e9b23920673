DROP TABLE runtimes;
