//go:build tools

// Package tools pins the Kubernetes control-plane binaries used by the local
// test cluster. k8s.io/kubernetes points its staging modules at local paths,
// so this module replaces each one with the published module of the same release.
package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
)
