CASE
	WHEN deleted_at IS NOT NULL THEN 'deprovisioned'
	WHEN last_op_type = '' THEN 'provisioning'
	WHEN last_op_state IN ('pending', 'in progress') THEN CASE last_op_type
		WHEN 'deprovision' THEN 'deprovisioning' WHEN 'suspension' THEN 'deprovisioning'
		WHEN 'update' THEN 'updating'
		WHEN 'upgradeKyma' THEN 'upgrading' WHEN 'upgradeCluster' THEN 'upgrading'
		ELSE 'provisioning' END
	WHEN last_op_state = 'failed' THEN 'failed'
	WHEN last_op_type = 'suspension' THEN 'suspended'
	WHEN last_op_type = 'deprovision' THEN 'deprovisioned'
	ELSE 'provisioned' END
