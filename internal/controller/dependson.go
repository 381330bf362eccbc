package controller

import (
	"context"
	"errors"
	"fmt"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	corev1 "k8s.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlreconcile "sigs.k8s.io/controller-runtime/pkg/reconcile"

	v2 "github.com/afterhooks/helm-controller/api/v2"
	"github.com/afterhooks/helm-controller/internal/connect"
)

// invalidDependencyReason marks a spec.dependsOn that cannot work as
// written; waiting does not help, so the object is Stalled. A readyExpr
// that does not compile gets upstream's InvalidCELExpression instead. A
// Warning event with this reason names a dependency that is checked,
// though not as the controller's settings suggest.
const invalidDependencyReason = "InvalidDependency"

// waitForDependencies holds the release back while a HelmRelease it depends
// on is not ready. It returns true when the reconcile must stop here, with
// errWaiting while it waits for its dependencies, or nil when the
// dependencies are invalid: as upstream's terminal error, that is a
// finished reconcile of the generation, so kstatus reads the Stalled
// condition.
func (r *HelmReleaseReconciler) waitForDependencies(ctx context.Context, obj *v2.HelmRelease) (ctrl.Result, bool, error) {
	var err error
	if len(obj.Spec.DependsOn) > 0 {
		var warnings []string
		err = checkDependencies(ctx, dependencyReader{cache: r.Client, api: r.APIReader}, obj, dependencyOptions{
			NoCrossNamespaceRefs: r.NoCrossNamespaceRef,
			AdditiveCEL:          r.AdditiveCELDependencyCheck,
			Warn:                 func(msg string) { warnings = append(warnings, msg) },
			Typed:                func(ctx context.Context) (*typedAccess, error) { return r.dependencyAccess(ctx, obj) },
		})
		r.warnSpec(ctx, obj, invalidDependencyReason, warnings)
	}
	if err == nil {
		clearPassedCheck(obj, helmv2.DependencyNotReadyReason, invalidDependencyReason, meta.InvalidCELExpressionReason)
		return ctrl.Result{}, false, nil
	}

	var invalid *InvalidDependencyError
	if errors.As(err, &invalid) {
		reason := invalidDependencyReason
		if invalid.InvalidCEL {
			// Upstream's reason: alerts on invalid CEL expressions
			// (healthCheckExprs and readyExpr alike) key on it.
			reason = meta.InvalidCELExpressionReason
		}
		conditions.MarkStalled(obj, reason, "%s", err)
		conditions.MarkFalse(obj, meta.ReadyCondition, reason, "%s", err)
		conditions.Delete(obj, meta.ReconcilingCondition)
		r.EventRecorder.Eventf(obj, nil, corev1.EventTypeWarning, reason, helmv2.ActionCheckDependencies.String(), "%s", err)
		return ctrl.Result{}, true, ctrlreconcile.TerminalError(err)
	}

	conditions.MarkFalse(obj, meta.ReadyCondition, helmv2.DependencyNotReadyReason, "%s", err)
	// Upstream's wording; Ready carries the dependencies' state.
	conditions.MarkReconciling(obj, meta.ProgressingReason, "Fulfilling prerequisites")
	ctrl.LoggerFrom(ctx).Info("dependencies not ready, retrying later", "error", err.Error(), "after", r.RequeueDependency)
	r.EventRecorder.Eventf(obj, nil, corev1.EventTypeNormal, helmv2.DependencyNotReadyReason, helmv2.ActionCheckDependencies.String(), "%s", err)
	return ctrl.Result{RequeueAfter: r.RequeueDependency}, true, errWaiting
}

// dependencyAccess is how obj's dependencies of other kinds than
// HelmRelease are read: as the release is applied (spec.kubeConfig,
// spec.serviceAccountName, --default-service-account), so that a tenant
// learns nothing through dependsOn its ServiceAccount may not read, or
// with the controller's own identity when the release uses it. Reads go to
// the API server, never to a cache: the controller watches no such kinds,
// and a cached read of one would start an informer for it.
func (r *HelmReleaseReconciler) dependencyAccess(ctx context.Context, obj *v2.HelmRelease) (*typedAccess, error) {
	own := &typedAccess{Mapper: r.Client.RESTMapper(), Reader: r.APIReader, Identity: "the controller's identity"}
	if r.Targets == nil {
		return own, nil
	}
	target, err := r.Targets.Build(ctx, connect.Request{
		Kind:               helmv2.HelmReleaseKind,
		Namespace:          obj.Namespace,
		Name:               obj.Name,
		ReleaseNamespace:   obj.GetReleaseNamespace(),
		KubeConfig:         obj.Spec.KubeConfig,
		ServiceAccountName: obj.Spec.ServiceAccountName,
		// Discovery once for this check, whatever spec.persistentClient
		// says: the check reads and is done.
		Persistent: true,
	})
	if err != nil {
		return nil, err
	}
	if !target.Remote && target.ServiceAccount == "" {
		return own, nil
	}
	identity := fmt.Sprintf("ServiceAccount '%s/%s'", obj.Namespace, target.ServiceAccount)
	// The controller's cluster serves the same kinds whoever asks: its
	// shared mapper saves a discovery per check.
	mapper := r.Client.RESTMapper()
	if target.Remote {
		identity = "the kubeconfig's identity on " + target.Cluster
		if target.ServiceAccount != "" {
			identity = fmt.Sprintf("ServiceAccount '%s/%s' on %s", obj.Namespace, target.ServiceAccount, target.Cluster)
		}
		if mapper, err = target.ToRESTMapper(); err != nil {
			return nil, fmt.Errorf("discovering the kinds of %s: %w", target.Cluster, err)
		}
	}
	cfg, err := target.ToRESTConfig()
	if err != nil {
		return nil, err
	}
	c, err := client.New(cfg, client.Options{Scheme: r.Scheme(), Mapper: mapper})
	if err != nil {
		return nil, fmt.Errorf("building a client as %s: %w", identity, err)
	}
	return &typedAccess{Mapper: mapper, Reader: c, Identity: identity}, nil
}
