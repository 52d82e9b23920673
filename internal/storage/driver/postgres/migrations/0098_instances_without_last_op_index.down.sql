CREATE INDEX instances_last_op ON instances (last_op_state, last_op_type);
ALTER TABLE instances RESET (fillfactor);
