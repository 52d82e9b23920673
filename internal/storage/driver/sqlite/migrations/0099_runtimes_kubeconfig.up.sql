-- As PostgreSQL's migration 0099: the runtime's kubeconfig, encrypted in a column of its own.
ALTER TABLE runtimes ADD COLUMN kubeconfig BLOB;
