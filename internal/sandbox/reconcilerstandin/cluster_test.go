package reconcilerstandin

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// Configurations are compared by the digests of their canonical encodings; a cluster kept before
// digests (the encodings themselves) compares the same.
func TestApplyComparesByDigest(t *testing.T) {
	cfg := Cluster{RuntimeID: "rt-1", Kubeconfig: "kc", KymaConfig: KymaConfig{Version: "2.20.0",
		Components: []Component{{Component: "istio"}}}}
	t0 := time.Unix(1000, 0)

	c := &cluster{}
	c.apply(cfg, false, false, t0)
	assert.Len(t, c.ConfigKey, 32)
	assert.Len(t, c.ClusterKey, 32)
	c.apply(cfg, false, false, t0.Add(time.Minute))
	assert.Equal(t, int64(1), c.ConfigVer, "the same configuration")
	assert.Equal(t, t0, c.AppliedAt)

	kyma := cfg
	kyma.KymaConfig.Version = "2.21.0"
	c.apply(kyma, false, false, t0.Add(time.Minute))
	assert.Equal(t, int64(2), c.ConfigVer)
	assert.Equal(t, int64(1), c.ClusterVer, "only Kyma changed")

	// kept with the encodings, as before digests
	n := normalized(cfg)
	configKey, _ := json.Marshal(n)
	n.KymaConfig = KymaConfig{}
	clusterKey, _ := json.Marshal(n)
	old := &cluster{Config: normalized(cfg), ConfigKey: configKey, ClusterKey: clusterKey, ClusterVer: 1, ConfigVer: 1, AppliedAt: t0}
	old.apply(cfg, false, false, t0.Add(time.Minute))
	assert.Equal(t, int64(1), old.ConfigVer, "the same configuration as kept before digests")
	old.apply(kyma, false, false, t0.Add(time.Minute))
	assert.Equal(t, int64(2), old.ConfigVer)
	assert.Equal(t, int64(1), old.ClusterVer, "the same cluster as kept before digests")
}
