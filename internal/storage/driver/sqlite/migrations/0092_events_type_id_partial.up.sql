-- PostgreSQL's 0092 leaves "succeeded" events out of (type, id): its planner proves that a query
-- for another type implies the index's predicate. SQLite uses a partial index only when the
-- query repeats its WHERE terms, so the type-filtered feed keeps the full index here. This keeps
-- both dialects' schema versions equal.
SELECT 1;
