// Package overrides holds the configuration entries Kyma components get at installation: what the
// provisioning steps collect (credentials of IAS, EMS, Event Hubs, Service Manager, defaults from
// configuration) and Create_Runtime / Create_Cluster_Configuration hand to the provisioner or the
// reconciler. Entries marked secret keep their values in the operation's encrypted secrets, never in
// its clear-text data, so the operation's JSON can be logged and listed safely.
package overrides

import (
	"fmt"
	"slices"
	"sort"

	"github.com/kyma-project/kyma-environment-broker/internal/storage"
)

// Global is the pseudo-component of overrides that apply to every component.
const Global = "_global"

// Entry is one override. Value is empty in a stored secret entry; Resolve fills it in.
type Entry struct {
	Key    string `json:"key"`
	Value  string `json:"value,omitempty"`
	Secret bool   `json:"secret,omitempty"`
}

// Overrides are entries per component, in the order they were set.
type Overrides map[string][]Entry

// SecretKey is where a secret entry's value lives in the operation's secrets.
func SecretKey(component, key string) string { return "overrides/" + component + "/" + key }

// Set adds entries to component, replacing entries with the same key. Values of secret entries go
// to secrets (created when nil) and are blanked in the overrides.
func (o *Overrides) Set(secrets *storage.Secrets, component string, entries ...Entry) {
	if *o == nil {
		*o = Overrides{}
	}
	for _, e := range entries {
		if e.Secret {
			if *secrets == nil {
				*secrets = storage.Secrets{}
			}
			(*secrets)[SecretKey(component, e.Key)] = e.Value
			e.Value = ""
		}
		list := (*o)[component]
		if i := slices.IndexFunc(list, func(x Entry) bool { return x.Key == e.Key }); i >= 0 {
			list[i] = e
		} else {
			list = append(list, e)
		}
		(*o)[component] = list
	}
}

// Components returns the component names, sorted, the global pseudo-component included.
func (o Overrides) Components() []string {
	names := make([]string, 0, len(o))
	for c := range o {
		names = append(names, c)
	}
	sort.Strings(names)
	return names
}

// Has tells whether component has an entry with key.
func (o Overrides) Has(component, key string) bool {
	return slices.ContainsFunc(o[component], func(e Entry) bool { return e.Key == key })
}

// Install lists the components to install: the given ones, then every other component that
// has overrides (the global pseudo-component excluded).
func (o Overrides) Install(components []string) []string {
	names := append([]string(nil), components...)
	for _, c := range o.Components() {
		if c != Global && !slices.Contains(names, c) {
			names = append(names, c)
		}
	}
	return names
}

// Resolve returns the overrides with secret values filled in from secrets. A secret entry whose
// value is missing is an error: handing a component an empty credential would fail much later,
// far from the cause.
func (o Overrides) Resolve(secrets storage.Secrets) (Overrides, error) {
	out := make(Overrides, len(o))
	for c, list := range o {
		resolved := make([]Entry, len(list))
		for i, e := range list {
			if e.Secret {
				v, ok := secrets[SecretKey(c, e.Key)]
				if !ok {
					return nil, fmt.Errorf("override %s of component %s: secret value missing", e.Key, c)
				}
				e.Value = v
			}
			resolved[i] = e
		}
		out[c] = resolved
	}
	return out, nil
}

// Copy copies src's entries (and the values of its secret entries, from srcSecrets) into o and
// dstSecrets: an upgrade starts from the overrides its instance was provisioned with.
func (o *Overrides) Copy(dstSecrets *storage.Secrets, src Overrides, srcSecrets storage.Secrets) error {
	resolved, err := src.Resolve(srcSecrets)
	if err != nil {
		return err
	}
	for _, c := range resolved.Components() {
		o.Set(dstSecrets, c, resolved[c]...)
	}
	return nil
}
