package runtimeclient

import (
	"crypto/sha256"
	"errors"

	lru "github.com/hashicorp/golang-lru/v2"
)

// Cached returns a Factory that opens each distinct kubeconfig once through f and keeps up to
// size runtimes by the kubeconfig's digest: the provisioner's steps open the same runtime's
// cluster several times per operation, and parsing the kubeconfig (and, for a real cluster,
// building its clients) each time cost more than the simulated cluster's answer. A kubeconfig
// that changes (rotated credentials) is a new key. Failures are not kept.
func Cached(f Factory, size int) Factory {
	c, err := lru.New[[sha256.Size]byte, Runtime](size)
	if err != nil {
		return f // size <= 0: nothing to keep
	}
	return cached{f: f, opened: c}
}

type cached struct {
	f      Factory
	opened *lru.Cache[[sha256.Size]byte, Runtime]
}

func (c cached) ForKubeconfig(kubeconfig string) (Runtime, error) {
	return c.open(kubeconfig, "", func() (Runtime, error) { return c.f.ForKubeconfig(kubeconfig) })
}

// ForNamespace opens confined runtimes through f (which must be a ConfinedFactory); the
// namespace is part of the key.
func (c cached) ForNamespace(kubeconfig, namespace string) (Runtime, error) {
	cf, ok := c.f.(ConfinedFactory)
	if !ok {
		return nil, errors.New("opening a confined runtime: the runtimes' factory cannot")
	}
	return c.open(kubeconfig, namespace, func() (Runtime, error) { return cf.ForNamespace(kubeconfig, namespace) })
}

// InstallsModules is f's.
func (c cached) InstallsModules() bool { return InstallsModulesInNamespaces(c.f) }

func (c cached) open(kubeconfig, namespace string, open func() (Runtime, error)) (Runtime, error) {
	key := sha256.Sum256([]byte(namespace + "\x00" + kubeconfig))
	if rt, ok := c.opened.Get(key); ok {
		return rt, nil
	}
	rt, err := open()
	if err != nil {
		return nil, err
	}
	c.opened.Add(key, rt)
	return rt, nil
}
