package reconcilerstandin

import (
	"crypto/sha256"
	"encoding/hex"
	"sort"
)

// Masked replaces secret configuration values in the inspection snapshot.
const Masked = "*****"

// KubeconfigInfo identifies a stored kubeconfig without showing it.
type KubeconfigInfo struct {
	Length int    `json:"length"`
	SHA256 string `json:"sha256"` // first 16 hex digits
}

// Object is one cluster in the inspection snapshot.
type Object struct {
	RuntimeID            string         `json:"runtimeID"`
	Status               string         `json:"status"`
	ClusterVersion       int64          `json:"clusterVersion"`
	ConfigurationVersion int64          `json:"configurationVersion"`
	RuntimeInput         RuntimeInput   `json:"runtimeInput"`
	Metadata             Metadata       `json:"metadata"`
	KymaVersion          string         `json:"kymaVersion"`
	Profile              string         `json:"profile"`
	Administrators       []string       `json:"administrators"`
	Components           []Component    `json:"components"` // secret values masked
	Kubeconfig           KubeconfigInfo `json:"kubeconfig"`
	// Calls counts apply (POST and PUT), status and delete calls on the cluster.
	Calls map[string]int `json:"calls"`
	// ConfigurationVersionsCreated counts the configurations that differed from the one before; a
	// retried apply of the same configuration does not count.
	ConfigurationVersionsCreated int `json:"configurationVersionsCreated"`
	// Creations counts the first creation and every start-over after a deletion.
	Creations int `json:"creations"`
}

// Objects is the inspection snapshot served at GET /_sandbox/reconciler/objects.
type Objects struct {
	// Clusters lists every cluster, deleted ones included, by runtime ID.
	Clusters []Object `json:"clusters"`
	// Calls counts calls per operation (apply, status, delete), including failed ones;
	// apply.invalid counts the applies answered 400.
	Calls map[string]int `json:"calls"`
}

// Snapshot returns the inspection snapshot, statuses as of now.
func (s *Server) Snapshot() Objects {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.opts.Now()
	out := Objects{Clusters: []Object{}, Calls: s.totals.Map()}
	for id, c := range s.clusters.All() {
		calls := make(map[string]int, len(c.Calls))
		for k, v := range c.Calls {
			calls[k] = v
		}
		sum := sha256.Sum256([]byte(c.Config.Kubeconfig))
		out.Clusters = append(out.Clusters, Object{
			RuntimeID:                    id,
			Status:                       c.status(now, s.opts.ReconcileTime, s.opts.DeleteTime),
			ClusterVersion:               c.ClusterVer,
			ConfigurationVersion:         c.ConfigVer,
			RuntimeInput:                 c.Config.RuntimeInput,
			Metadata:                     c.Config.Metadata,
			KymaVersion:                  c.Config.KymaConfig.Version,
			Profile:                      c.Config.KymaConfig.Profile,
			Administrators:               append([]string{}, c.Config.KymaConfig.Administrators...),
			Components:                   masked(c.Config.KymaConfig.Components),
			Kubeconfig:                   KubeconfigInfo{Length: len(c.Config.Kubeconfig), SHA256: hex.EncodeToString(sum[:8])},
			Calls:                        calls,
			ConfigurationVersionsCreated: int(c.ConfigVer),
			Creations:                    c.Creations,
		})
	}
	sort.Slice(out.Clusters, func(i, j int) bool { return out.Clusters[i].RuntimeID < out.Clusters[j].RuntimeID })
	return out
}

// masked copies comps with secret values replaced, so the snapshot can be shown and logged.
func masked(comps []Component) []Component {
	out := make([]Component, len(comps))
	for i, comp := range comps {
		comp.Configuration = append([]Configuration{}, comp.Configuration...)
		for j := range comp.Configuration {
			if comp.Configuration[j].Secret {
				comp.Configuration[j].Value = Masked
			}
		}
		out[i] = comp
	}
	return out
}
