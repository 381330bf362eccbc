//go:build tools

// Package tools pins the helm CLI at the Helm SDK version the controller is
// built with (go.mod), so e2e tests can package and push charts exactly as
// chart authors do with `helm package` and `helm push`.
package tools

import _ "helm.sh/helm/v4/cmd/helm"
