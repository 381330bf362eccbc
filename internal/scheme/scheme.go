// Package scheme is the one runtime.Scheme of the kinds the controller and
// `helm-controller plan` read and write: Kubernetes' built-in kinds,
// source-controller's sources and the HelmRelease.
package scheme

import (
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"

	v2 "github.com/afterhooks/helm-controller/api/v2"
)

// New returns a scheme of the built-in kinds, the sources and the
// HelmRelease.
func New() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(s))
	utilruntime.Must(sourcev1.AddToScheme(s))
	utilruntime.Must(v2.AddToScheme(s))
	return s
}
