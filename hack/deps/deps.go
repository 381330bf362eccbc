//go:build deps

package deps

import (
	_ "github.com/fluxcd/cli-utils/pkg/kstatus/polling"
	_ "github.com/fluxcd/helm-controller/api/v2"
	_ "github.com/fluxcd/pkg/chartutil"
	_ "github.com/fluxcd/pkg/runtime/acl"
	_ "github.com/fluxcd/pkg/runtime/client"
	_ "github.com/fluxcd/pkg/runtime/conditions"
	_ "github.com/fluxcd/pkg/runtime/controller"
	_ "github.com/fluxcd/pkg/runtime/events"
	_ "github.com/fluxcd/pkg/runtime/features"
	_ "github.com/fluxcd/pkg/runtime/leaderelection"
	_ "github.com/fluxcd/pkg/runtime/logger"
	_ "github.com/fluxcd/pkg/runtime/patch"
	_ "github.com/fluxcd/pkg/runtime/probes"
	_ "github.com/fluxcd/pkg/ssa"
	_ "github.com/fluxcd/source-controller/api/v1"
	_ "github.com/google/go-containerregistry/pkg/registry"
	_ "helm.sh/helm/v4/pkg/action"
	_ "helm.sh/helm/v4/pkg/repo/v1"
	_ "sigs.k8s.io/controller-runtime"
	_ "sigs.k8s.io/controller-runtime/pkg/envtest"
)
