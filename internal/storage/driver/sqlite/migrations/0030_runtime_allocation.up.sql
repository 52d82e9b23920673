-- Where a runtime runs and what it was given (host, audience URL, CPU, memory, storage, data dir):
-- JSON written by the provisioner once its backend has allocated the runtime.
ALTER TABLE runtimes ADD COLUMN allocation TEXT;
