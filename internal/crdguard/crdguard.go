// Package crdguard checks that the API server serves this controller's
// HelmRelease CRD. With upstream's CRD (what `flux install` and `flux
// bootstrap` apply) the API server prunes waitStrategy from every
// HelmRelease before the controller sees it, so afterHooks silently never
// happens. The guard says so in the log and in a metric, at start-up and
// whenever the CRD changes.
//
// It sends no Warning event to HelmReleases: a pruned field is gone, so the
// controller cannot tell which releases asked for afterHooks, and an event
// on every release would mostly reach users who never set it.
package crdguard

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apiextensionsinformers "k8s.io/apiextensions-apiserver/pkg/client/informers/externalversions"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
)

const (
	// CRDName is the HelmRelease CRD.
	CRDName = "helmreleases.helm.toolkit.fluxcd.io"
	// servedVersion is the API version the controller reads.
	servedVersion = "v2"
	// MetricName is the gauge: 1 when the served schema has waitStrategy
	// under install, upgrade and rollback, 0 when not, -1 (Unknown) while
	// the guard cannot tell.
	MetricName = "helm_controller_crd_wait_strategy_served"
)

// Values of the gauge.
const (
	Served = 1
	Pruned = 0
	// Unknown: not checked yet, or the controller may not read the CRD
	// (RBAC). It is not 0, so an alert on "== 0" fires only when the
	// guard has seen the field missing.
	Unknown = -1
)

// actions are the spec fields that take a waitStrategy.
var actions = []string{"install", "upgrade", "rollback"}

// Fix is what the error log tells an operator to do.
const Fix = "apply this controller's HelmRelease CRD (the config/flux kustomize component, " +
	"or helm-controller.crds.yaml of the release; see docs/install.md) and check it with " +
	"'kubectl explain helmrelease.spec.install.waitStrategy'"

// MissingWaitStrategy lists the fields (spec.install.waitStrategy, …) that
// the served v2 schema of crd lacks; empty when all are there.
func MissingWaitStrategy(crd *apiextensionsv1.CustomResourceDefinition) []string {
	var schema *apiextensionsv1.JSONSchemaProps
	for _, v := range crd.Spec.Versions {
		if v.Name == servedVersion && v.Served && v.Schema != nil {
			schema = v.Schema.OpenAPIV3Schema
		}
	}
	var missing []string
	for _, action := range actions {
		if !hasPath(schema, "spec", action, "waitStrategy") {
			missing = append(missing, "spec."+action+".waitStrategy")
		}
	}
	return missing
}

func hasPath(s *apiextensionsv1.JSONSchemaProps, path ...string) bool {
	for _, p := range path {
		if s == nil {
			return false
		}
		next, ok := s.Properties[p]
		if !ok {
			return false
		}
		s = &next
	}
	return s != nil
}

// +kubebuilder:rbac:groups=apiextensions.k8s.io,resources=customresourcedefinitions,verbs=get;list;watch

// Guard watches the HelmRelease CRD. It runs on every replica, leader or
// not, since each one's log and metrics are read on their own.
type Guard struct {
	client apiextensionsclient.Interface
	log    logr.Logger
	gauge  prometheus.Gauge

	mu       sync.Mutex
	reported bool   // whether a verdict was logged yet
	last     string // the last verdict logged, so an unchanged CRD logs once
}

// New returns a guard reporting to reg.
func New(cfg *rest.Config, reg prometheus.Registerer, log logr.Logger) (*Guard, error) {
	cs, err := apiextensionsclient.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("creating the CRD client: %w", err)
	}
	return newGuard(cs, reg, log)
}

func newGuard(cs apiextensionsclient.Interface, reg prometheus.Registerer, log logr.Logger) (*Guard, error) {
	g := &Guard{client: cs, log: log.WithName("crd-guard"), gauge: prometheus.NewGauge(prometheus.GaugeOpts{
		Name: MetricName,
		Help: "1 when the served HelmRelease CRD has waitStrategy under install, upgrade and rollback; 0 when the API server would prune it; -1 when the controller cannot tell (not checked yet, or RBAC forbids reading the CRD).",
	})}
	g.gauge.Set(Unknown)
	if err := reg.Register(g.gauge); err != nil {
		return nil, fmt.Errorf("registering %s: %w", MetricName, err)
	}
	return g, nil
}

// NeedLeaderElection tells the manager to run the guard on every replica.
func (g *Guard) NeedLeaderElection() bool { return false }

// Start checks the CRD, then re-checks it on every change until ctx ends.
func (g *Guard) Start(ctx context.Context) error {
	crd, err := g.client.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, CRDName, metav1.GetOptions{})
	switch {
	case apierrors.IsForbidden(err):
		// The gauge stays Unknown: nothing says the field is pruned.
		g.log.Info("cannot read the HelmRelease CRD, so cannot check it serves waitStrategy; "+
			"grant get/list/watch on customresourcedefinitions to check", "error", err.Error())
		return nil
	case apierrors.IsNotFound(err):
		g.report(nil)
	case err != nil:
		// Not fatal: the watch below retries, and the controller runs on.
		g.log.Error(err, "reading the HelmRelease CRD")
	default:
		g.report(crd)
	}

	factory := apiextensionsinformers.NewSharedInformerFactoryWithOptions(g.client, 0,
		apiextensionsinformers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("metadata.name", CRDName).String()
		}))
	informer := factory.Apiextensions().V1().CustomResourceDefinitions().Informer()
	if _, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { g.reportObject(obj) },
		UpdateFunc: func(_, obj any) { g.reportObject(obj) },
		DeleteFunc: func(any) { g.report(nil) },
	}); err != nil {
		return fmt.Errorf("watching the HelmRelease CRD: %w", err)
	}
	factory.Start(ctx.Done())
	<-ctx.Done()
	factory.Shutdown()
	return nil
}

func (g *Guard) reportObject(obj any) {
	if crd, ok := obj.(*apiextensionsv1.CustomResourceDefinition); ok {
		g.report(crd)
	}
}

// report sets the gauge and logs when the verdict changes.
func (g *Guard) report(crd *apiextensionsv1.CustomResourceDefinition) {
	var missing []string
	if crd == nil {
		missing = []string{"the whole CRD " + CRDName}
	} else {
		missing = MissingWaitStrategy(crd)
	}
	verdict := strings.Join(missing, ", ")
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(missing) == 0 {
		g.gauge.Set(Served)
	} else {
		g.gauge.Set(Pruned)
	}
	if g.reported && verdict == g.last {
		return
	}
	g.reported, g.last = true, verdict
	if len(missing) == 0 {
		g.log.Info("the served HelmRelease CRD has waitStrategy under install, upgrade and rollback")
		return
	}
	g.log.Error(fmt.Errorf("missing %s", verdict),
		"the served HelmRelease CRD is not this controller's: the API server drops waitStrategy from every HelmRelease, so afterHooks cannot take effect; "+Fix)
}
