-- A runtime's kubeconfig, encrypted on its own (storage.RuntimeFields.Kubeconfig): the
-- provisioner's Wait_For_Cluster_Creation stored it by reading the runtime, decrypting its
-- secrets, adding the kubeconfig and writing the runtime back (two statements a provisioning).
-- It now sets this column on its operation's next save. A runtime written before keeps the
-- kubeconfig in its secrets, where reads still find it; the runtime's next write moves it here.
ALTER TABLE runtimes ADD COLUMN kubeconfig BYTEA;
