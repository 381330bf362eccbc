//go:build tools

// Package tools pins Flux's source-controller for the local test cluster.
package tools

import _ "github.com/fluxcd/source-controller"
