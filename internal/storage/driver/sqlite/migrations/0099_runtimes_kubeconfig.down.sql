ALTER TABLE runtimes DROP COLUMN kubeconfig;
