//go:build tools

// Package tools pins the Flux Operator for the FluxInstance test.
package tools

import _ "github.com/controlplaneio-fluxcd/flux-operator/cmd/operator"
