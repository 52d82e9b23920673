ALTER TABLE operations RESET (autovacuum_analyze_scale_factor, autovacuum_analyze_threshold);
