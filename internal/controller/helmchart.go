package controller

import (
	"context"
	"fmt"
	"maps"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	eventv1 "github.com/fluxcd/pkg/apis/event/v1beta1"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	v2 "github.com/afterhooks/helm-controller/api/v2"
)

// reconcileChartTemplate creates or updates the HelmChart that serves the
// HelmRelease's chart template, and records it in status.helmChart.
func (r *HelmReleaseReconciler) reconcileChartTemplate(ctx context.Context, obj *v2.HelmRelease) error {
	tpl := obj.Spec.Chart
	ns, name := tpl.GetNamespace(obj.Namespace), obj.Upstream().GetHelmChartName()
	if r.NoCrossNamespaceRef && tpl.Spec.SourceRef.Namespace != "" && tpl.Spec.SourceRef.Namespace != obj.Namespace {
		return fmt.Errorf("cannot access %s/%s: cross-namespace references are disabled (--no-cross-namespace-refs)",
			tpl.Spec.SourceRef.Kind, client.ObjectKey{Namespace: tpl.Spec.SourceRef.Namespace, Name: tpl.Spec.SourceRef.Name})
	}

	// A template moved to another namespace or name leaves its old HelmChart behind.
	if err := r.deleteStaleChart(ctx, obj, ns, name); err != nil {
		return err
	}

	chart := &sourcev1.HelmChart{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	op, err := controllerutil.CreateOrPatch(ctx, r.Client, chart, func() error {
		var labels, annotations map[string]string
		if tpl.ObjectMeta != nil {
			labels, annotations = tpl.ObjectMeta.Labels, tpl.ObjectMeta.Annotations
		}
		// The template's metadata is the HelmChart's, as upstream does, with
		// upstream's owner labels naming the HelmRelease.
		chart.Labels = maps.Clone(labels)
		if chart.Labels == nil {
			chart.Labels = map[string]string{}
		}
		chart.Labels[helmv2.GroupVersion.Group+"/name"] = obj.Name
		chart.Labels[helmv2.GroupVersion.Group+"/namespace"] = obj.Namespace
		chart.Annotations = annotations
		chart.Spec = sourcev1.HelmChartSpec{
			Chart:   tpl.Spec.Chart,
			Version: tpl.Spec.Version,
			SourceRef: sourcev1.LocalHelmChartSourceReference{
				APIVersion: tpl.Spec.SourceRef.APIVersion,
				Kind:       tpl.Spec.SourceRef.Kind,
				Name:       tpl.Spec.SourceRef.Name,
			},
			Interval:                 tpl.GetInterval(obj.Spec.Interval),
			ReconcileStrategy:        tpl.Spec.ReconcileStrategy,
			ValuesFiles:              tpl.Spec.ValuesFiles,
			IgnoreMissingValuesFiles: tpl.Spec.IgnoreMissingValuesFiles,
		}
		if v := tpl.Spec.Verify; v != nil {
			chart.Spec.Verify = &sourcev1.HelmChartVerification{Provider: v.Provider, SecretRef: v.SecretRef}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("failed to create or update HelmChart %s/%s: %w", ns, name, err)
	}
	// Upstream's trace events: persisted as Normal Kubernetes events, not
	// forwarded to notification-controller.
	if verb := map[controllerutil.OperationResult]string{
		controllerutil.OperationResultCreated: "Created", controllerutil.OperationResultUpdated: "Configured",
	}[op]; verb != "" {
		r.EventRecorder.Eventf(obj, eventv1.EventTypeTrace, "HelmChart"+verb, "%s HelmChart/%s/%s with SourceRef '%s/%s/%s'",
			verb, ns, name, tpl.Spec.SourceRef.Kind, ns, tpl.Spec.SourceRef.Name)
	}
	obj.Status.HelmChart = ns + "/" + name
	return nil
}

// deleteStaleChart removes the HelmChart recorded in the status when the
// template now asks for another one.
func (r *HelmReleaseReconciler) deleteStaleChart(ctx context.Context, obj *v2.HelmRelease, ns, name string) error {
	oldNS, oldName := obj.Status.GetHelmChart()
	if oldName == "" || (oldNS == ns && oldName == name) {
		return nil
	}
	return r.deleteChart(ctx, obj, oldNS, oldName)
}

// deleteChartTemplate removes the HelmChart of a chart template that is no
// longer used (switch to chartRef, or deletion).
func (r *HelmReleaseReconciler) deleteChartTemplate(ctx context.Context, obj *v2.HelmRelease) error {
	ns, name := obj.Status.GetHelmChart()
	if name == "" {
		return nil
	}
	return r.deleteChart(ctx, obj, ns, name)
}

func (r *HelmReleaseReconciler) deleteChart(ctx context.Context, obj *v2.HelmRelease, ns, name string) error {
	chart := &sourcev1.HelmChart{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	switch err := r.Delete(ctx, chart); {
	case err == nil:
		r.EventRecorder.Eventf(obj, eventv1.EventTypeTrace, "HelmChartDeleted", "deleted HelmChart '%s/%s'", ns, name)
	case !apierrors.IsNotFound(err):
		return fmt.Errorf("failed to delete HelmChart %s/%s: %w", ns, name, err)
	}
	obj.Status.HelmChart = ""
	return nil
}
