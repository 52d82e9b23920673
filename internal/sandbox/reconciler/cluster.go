package reconciler

import (
	"bytes"
	"encoding/json"
	"time"
)

// cluster is what the stand-in knows of one runtime's cluster.
type cluster struct {
	config     Cluster
	configKey  []byte // canonical JSON of the whole configuration
	clusterKey []byte // canonical JSON of what makes a cluster version: all but kymaConfig
	clusterVer int64
	configVer  int64
	appliedAt  time.Time // when the current configuration version was created
	failing    bool      // the current configuration contains a failing component
	deleteAt   time.Time // when deletion was requested; zero when it was not
	calls      map[string]int
	// creations counts the first creation and every start-over after a deletion; configVer counts
	// the configuration versions created, since versions are never reused.
	creations int
}

// status derives the cluster's status at now from its timestamps.
func (c *cluster) status(now time.Time, reconcile, del time.Duration) string {
	if !c.deleteAt.IsZero() {
		return phase(now.Sub(c.deleteAt), del, StatusDeletePending, StatusDeleting, StatusDeleted)
	}
	final := StatusReady
	if c.failing {
		final = StatusError
	}
	return phase(now.Sub(c.appliedAt), reconcile, StatusReconcilePending, StatusReconciling, final)
}

// phase is first for the first d after the start, second for the next d, and final afterwards.
func phase(elapsed, d time.Duration, first, second, final string) string {
	switch {
	case elapsed < d:
		return first
	case elapsed < 2*d:
		return second
	default:
		return final
	}
}

// keys returns the canonical encodings configurations are compared by. Empty and missing lists are
// the same configuration.
func keys(c Cluster) (configKey, clusterKey []byte) {
	c = normalized(c)
	configKey, _ = json.Marshal(c)
	c.KymaConfig = KymaConfig{}
	clusterKey, _ = json.Marshal(c)
	return configKey, clusterKey
}

func normalized(c Cluster) Cluster {
	if c.KymaConfig.Administrators == nil {
		c.KymaConfig.Administrators = []string{}
	}
	comps := make([]Component, len(c.KymaConfig.Components))
	for i, comp := range c.KymaConfig.Components {
		if comp.Configuration == nil {
			comp.Configuration = []Configuration{}
		}
		comps[i] = comp
	}
	c.KymaConfig.Components = comps
	return c
}

// apply records configuration cfg at now. A configuration equal to the current one changes nothing
// unless the cluster is being or has been deleted, in which case it starts over.
func (c *cluster) apply(cfg Cluster, failing bool, now time.Time) {
	configKey, clusterKey := keys(cfg)
	restart := !c.deleteAt.IsZero()
	if !restart && c.configVer > 0 && bytes.Equal(configKey, c.configKey) {
		return
	}
	if restart || c.configVer == 0 {
		c.creations++
	}
	if restart || c.clusterVer == 0 || !bytes.Equal(clusterKey, c.clusterKey) {
		c.clusterVer++
	}
	c.configVer++
	c.config = normalized(cfg)
	c.configKey, c.clusterKey = configKey, clusterKey
	c.appliedAt = now
	c.failing = failing
	c.deleteAt = time.Time{}
}
