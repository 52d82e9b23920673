package reconcilerstandin

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"time"
)

// cluster is what the stand-in knows of one runtime's cluster; it is also its row in the store.
type cluster struct {
	Config     Cluster        `json:"config"`
	ConfigKey  []byte         `json:"configKey"`  // digest of the canonical JSON of the whole configuration
	ClusterKey []byte         `json:"clusterKey"` // digest of what makes a cluster version: all but kymaConfig
	ClusterVer int64          `json:"clusterVersion"`
	ConfigVer  int64          `json:"configurationVersion"`
	AppliedAt  time.Time      `json:"appliedAt"` // when the current configuration version was created
	Failing    bool           `json:"failing"`   // the current configuration contains a failing component
	Retryable  bool           `json:"retryable"` // it contains a component that fails once retryably
	DeleteAt   time.Time      `json:"deleteAt"`  // when deletion was requested; zero when it was not
	Calls      map[string]int `json:"calls"`
	// Creations counts the first creation and every start-over after a deletion; ConfigVer counts
	// the configuration versions created, since versions are never reused.
	Creations int `json:"creations"`
}

// status derives the cluster's status at now from its timestamps.
func (c *cluster) status(now time.Time, reconcile, del time.Duration) string {
	if !c.DeleteAt.IsZero() {
		elapsed := now.Sub(c.DeleteAt)
		if c.Retryable && elapsed >= 2*del {
			return phase(elapsed-2*del, del, StatusDeleteErrorRetryable, StatusDeleting, StatusDeleted)
		}
		return phase(elapsed, del, StatusDeletePending, StatusDeleting, StatusDeleted)
	}
	final := StatusReady
	if c.Failing {
		final = StatusError
	}
	elapsed := now.Sub(c.AppliedAt)
	if c.Retryable && elapsed >= 2*reconcile {
		return phase(elapsed-2*reconcile, reconcile, StatusReconcileErrorRetryable, StatusReconciling, final)
	}
	return phase(elapsed, reconcile, StatusReconcilePending, StatusReconciling, final)
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

// keys returns the SHA-256 digests of the canonical encodings configurations are compared by.
// Empty and missing lists are the same configuration. Digests, not the encodings, are kept: the
// cluster's row is rewritten on every request about it, and the encodings tripled its size.
func keys(c Cluster) (configKey, clusterKey []byte) {
	c = normalized(c)
	b, _ := json.Marshal(c)
	whole := sha256.Sum256(b)
	c.KymaConfig = KymaConfig{}
	b, _ = json.Marshal(c)
	cl := sha256.Sum256(b)
	return whole[:], cl[:]
}

// sameKey tells whether a kept key is the digest key; a cluster kept before digests holds the
// canonical encoding itself, compared by its digest.
func sameKey(kept, key []byte) bool {
	if len(kept) != sha256.Size {
		d := sha256.Sum256(kept)
		kept = d[:]
	}
	return bytes.Equal(kept, key)
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
func (c *cluster) apply(cfg Cluster, failing, retryable bool, now time.Time) {
	configKey, clusterKey := keys(cfg)
	restart := !c.DeleteAt.IsZero()
	if !restart && c.ConfigVer > 0 && sameKey(c.ConfigKey, configKey) {
		return
	}
	if restart || c.ConfigVer == 0 {
		c.Creations++
	}
	if restart || c.ClusterVer == 0 || !sameKey(c.ClusterKey, clusterKey) {
		c.ClusterVer++
	}
	c.ConfigVer++
	c.Config = normalized(cfg)
	c.ConfigKey, c.ClusterKey = configKey, clusterKey
	c.AppliedAt = now
	c.Failing, c.Retryable = failing, retryable
	c.DeleteAt = time.Time{}
}
