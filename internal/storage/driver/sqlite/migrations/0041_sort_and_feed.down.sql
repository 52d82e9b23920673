CREATE INDEX instances_global_account_id ON instances (global_account_id);
CREATE INDEX instances_sub_account_id ON instances (sub_account_id);
CREATE INDEX instances_runtime_id ON instances (runtime_id);
DROP INDEX events_type_id;
DROP INDEX instances_sort_provider_region;
DROP INDEX instances_sort_plan_id;
DROP INDEX instances_sort_sub_account_id;
DROP INDEX instances_sort_global_account_id;
DROP INDEX instances_sort_runtime_id;
