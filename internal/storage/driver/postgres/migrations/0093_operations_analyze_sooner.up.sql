-- Claims read due operations in order through (due_at, id) only while the planner's statistics
-- know how many operations are active; without them (a fresh table, or a burst such as an
-- orchestration creating thousands of operations) it reads and sorts every active operation
-- through (state, type) on each claim (auto_explain on a fresh table with 10,000 waiting: ~10 ms
-- per claim instead of well under 1 ms). Autovacuum analyzes a table after 50 rows plus 10% of
-- it changed; here after 200 plus 1%, so the statistics catch up at its next round (a minute).
ALTER TABLE operations SET (autovacuum_analyze_scale_factor = 0.01, autovacuum_analyze_threshold = 200);
