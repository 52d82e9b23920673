DROP TABLE orchestration_operations;
DROP TABLE orchestrations;
