-- GET /runtimes sorts by these columns with instance_id as the tie-break: each index serves
-- the ORDER BY and its LIMIT without sorting the fleet. created_at has one (0020), instance_id
-- is the key; state is derived (0020) and sorted in memory.
CREATE INDEX instances_sort_runtime_id ON instances (runtime_id, instance_id);
CREATE INDEX instances_sort_global_account_id ON instances (global_account_id, instance_id);
CREATE INDEX instances_sort_sub_account_id ON instances (sub_account_id, instance_id);
CREATE INDEX instances_sort_plan_id ON instances (plan_id, instance_id);
CREATE INDEX instances_sort_provider_region ON instances (provider_region, instance_id);
-- The fleet-wide event feed filtered by type, newest first.
CREATE INDEX events_type_id ON events (type, id);
-- The composite indexes serve the equality filters these served.
DROP INDEX instances_runtime_id;
DROP INDEX instances_global_account_id;
DROP INDEX instances_sub_account_id;
