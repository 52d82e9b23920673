DROP TABLE singleton_leases;
DROP TABLE write_probes;
