//go:build tools

// Package tools records the kube-apiserver and kubectl commands as dependencies
// of this module, so that "go build k8s.io/kubernetes/cmd/kube-apiserver" (and
// cmd/kubectl) works from this directory. It is never compiled.
package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kubectl"
)
