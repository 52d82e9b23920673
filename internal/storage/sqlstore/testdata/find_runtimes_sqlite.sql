SELECT instance_id, runtime_id, global_account_id, sub_account_id, service_id, plan_id, provider_region, dashboard_url, parameters, secrets, created_at, updated_at, version, deleted_at, expired_at, last_op_type, last_op_state, CASE
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
	ELSE 'provisioned' END FROM instances WHERE (CASE
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
	ELSE 'provisioned' END) IN (?,?) ORDER BY (CASE
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
	ELSE 'provisioned' END) DESC, instance_id DESC
