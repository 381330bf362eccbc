//go:build tools

// Package tools pins upstream Flux helm-controller, built as a test tool for
// takeover and going-back tests (the version Flux v2.9.5 ships).
package tools

import _ "github.com/fluxcd/helm-controller"
