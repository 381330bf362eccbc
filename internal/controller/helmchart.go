package controller

import (
	"context"
	"fmt"
	"maps"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	eventv1 "github.com/fluxcd/pkg/apis/event/v1beta1"
	"github.com/fluxcd/pkg/ssa"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

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

	chart := chartFromTemplate(obj, ns, name)
	entry, err := r.applyChart(ctx, obj, chart)
	if err != nil {
		return fmt.Errorf("failed to apply HelmChart %s/%s: %w", ns, name, err)
	}
	// Upstream's trace events: persisted as Normal Kubernetes events, not
	// forwarded to notification-controller.
	if verb := map[ssa.Action]string{ssa.CreatedAction: "Created", ssa.ConfiguredAction: "Configured"}[entry.Action]; verb != "" {
		r.EventRecorder.Eventf(obj, eventv1.EventTypeTrace, "HelmChart"+verb, "%s HelmChart/%s/%s with SourceRef '%s/%s/%s'",
			verb, ns, name, tpl.Spec.SourceRef.Kind, ns, tpl.Spec.SourceRef.Name)
	}
	obj.Status.HelmChart = ns + "/" + name
	return nil
}

// chartFromTemplate is the HelmChart the template of obj asks for.
func chartFromTemplate(obj *v2.HelmRelease, ns, name string) *sourcev1.HelmChart {
	tpl := obj.Spec.Chart
	var labels, annotations map[string]string
	if tpl.ObjectMeta != nil {
		labels, annotations = maps.Clone(tpl.ObjectMeta.Labels), maps.Clone(tpl.ObjectMeta.Annotations)
	}
	chart := &sourcev1.HelmChart{
		TypeMeta:   metav1.TypeMeta{APIVersion: sourcev1.GroupVersion.String(), Kind: sourcev1.HelmChartKind},
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels, Annotations: annotations},
		Spec: sourcev1.HelmChartSpec{
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
		},
	}
	if v := tpl.Spec.Verify; v != nil {
		chart.Spec.Verify = &sourcev1.HelmChartVerification{Provider: v.Provider, SecretRef: v.SecretRef}
	}
	return chart
}

// applyChart writes chart with server-side apply as upstream does: same
// field manager, same owner labels naming the HelmRelease, so either
// controller can take the HelmChart over from the other. Fields an older
// build of this controller set with a merge patch are handed over to the
// apply.
func (r *HelmReleaseReconciler) applyChart(ctx context.Context, obj *v2.HelmRelease, chart *sourcev1.HelmChart) (*ssa.ChangeSetEntry, error) {
	raw, err := runtime.DefaultUnstructuredConverter.ToUnstructured(chart)
	if err != nil {
		return nil, fmt.Errorf("converting the HelmChart: %w", err)
	}
	u := &unstructured.Unstructured{Object: raw}
	manager := r.FieldManager
	if manager == "" {
		manager = ControllerName
	}
	rm := ssa.NewResourceManager(r.Client, nil, ssa.Owner{Group: helmv2.GroupVersion.Group, Field: manager})
	rm.SetOwnerLabels([]*unstructured.Unstructured{u}, obj.Name, obj.Namespace)
	opts := ssa.DefaultApplyOptions()
	opts.Cleanup.FieldManagers = []ssa.FieldManager{{Name: manager, ExactMatch: true, OperationType: metav1.ManagedFieldsOperationUpdate}}
	return rm.Apply(ctx, u, opts)
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
