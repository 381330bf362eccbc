//go:build tools

// Package tools pins kwok, which plays the kubelet in the local test cluster.
package tools

import _ "sigs.k8s.io/kwok/cmd/kwok"
