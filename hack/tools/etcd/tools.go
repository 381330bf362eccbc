//go:build tools

// Package tools pins etcd for the local test cluster.
package tools

import _ "go.etcd.io/etcd/server/v3"
