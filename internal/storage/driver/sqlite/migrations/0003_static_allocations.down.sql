DROP TABLE static_allocations;
