package controller

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"maps"
	"strings"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	eventv1 "github.com/fluxcd/pkg/apis/event/v1"
	"github.com/fluxcd/pkg/ssa"
	ssautil "github.com/fluxcd/pkg/ssa/utils"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	"helm.sh/helm/v4/pkg/registry"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v2 "github.com/afterhooks/helm-controller/api/v2"
)

// reconcileChartTemplate creates or updates the source object (a HelmChart,
// or an OCIRepository with kind: OCIRepository) that serves the
// HelmRelease's chart template, and records it in status.helmChart.
func (r *HelmReleaseReconciler) reconcileChartTemplate(ctx context.Context, obj *v2.HelmRelease) error {
	ref := obj.GetHelmChartTemplateReference()
	if err := r.templateSourceAllowed(obj); err != nil {
		return err
	}

	// A template that changed kind, namespace or name leaves its old
	// object behind.
	if err := r.deleteStaleChart(ctx, obj, ref); err != nil {
		return err
	}

	desired, sourceRefSuffix := sourceFromTemplate(obj, ref)
	entry, err := r.applyTemplateSource(ctx, obj, desired)
	if err != nil {
		err = fmt.Errorf("failed to run server-side apply: %w", err)
		r.traceEvent(obj, ref.Kind+"SyncErr", err.Error())
		return fmt.Errorf("failed to apply %s: %w", ref, err)
	}
	// Upstream's trace events: persisted as Normal Kubernetes events, not
	// forwarded to notification-controller.
	if verb := map[ssa.Action]string{ssa.CreatedAction: "Created", ssa.ConfiguredAction: "Configured"}[entry.Action]; verb != "" {
		r.traceEvent(obj, ref.Kind+verb, fmt.Sprintf("%s %s%s", verb, entry.Subject, sourceRefSuffix))
	}
	setChartStatus(obj, ref)
	return nil
}

// templateSourceAllowed refuses a HelmChart template whose sourceRef
// crosses namespaces when --no-cross-namespace-refs is set. An
// OCIRepository template is always made in the HelmRelease's namespace.
func (r *HelmReleaseReconciler) templateSourceAllowed(obj *v2.HelmRelease) error {
	src := obj.Spec.Chart.Spec.SourceRef
	if !r.NoCrossNamespaceRef || src == nil || src.Namespace == "" || src.Namespace == obj.Namespace {
		return nil
	}
	return fmt.Errorf("cannot access %s/%s: cross-namespace references are disabled (--no-cross-namespace-refs)",
		src.Kind, client.ObjectKey{Namespace: src.Namespace, Name: src.Name})
}

// setChartStatus records ref in status.helmChart in upstream's form:
// "<namespace>/<name>" for a HelmChart (the form every version has
// written), "<kind>/<namespace>/<name>" for any other kind; nil clears it.
func setChartStatus(obj *v2.HelmRelease, ref *helmv2.HelmChartReference) {
	if ref == nil {
		obj.Status.HelmChart = ""
		return
	}
	obj.Status.HelmChart = strings.TrimPrefix(ref.String(), sourcev1.HelmChartKind+"/")
}

// sourceFromTemplate is the object the chart template of obj asks for, and
// the words its events add after the object's name.
func sourceFromTemplate(obj *v2.HelmRelease, ref *helmv2.HelmChartReference) (client.Object, string) {
	if ref.Kind == sourcev1.OCIRepositoryKind {
		return ociRepositoryFromTemplate(obj, ref), ""
	}
	chart := chartFromTemplate(obj, ref)
	return chart, fmt.Sprintf(" with SourceRef '%s/%s/%s'", chart.Spec.SourceRef.Kind, ref.Namespace, chart.Spec.SourceRef.Name)
}

// templateMeta is the object metadata a chart template asks for.
func templateMeta(obj *v2.HelmRelease, ref *helmv2.HelmChartReference) metav1.ObjectMeta {
	m := metav1.ObjectMeta{Namespace: ref.Namespace, Name: ref.Name}
	if tm := obj.Spec.Chart.ObjectMeta; tm != nil {
		m.Labels, m.Annotations = maps.Clone(tm.Labels), maps.Clone(tm.Annotations)
	}
	return m
}

// chartFromTemplate is the HelmChart the template of obj asks for. The
// defaults upstream's CRD used to set (version '*', reconcileStrategy
// ChartVersion) are applied here since v1.7 dropped them from the schema.
func chartFromTemplate(obj *v2.HelmRelease, ref *helmv2.HelmChartReference) *sourcev1.HelmChart {
	spec := obj.Spec.Chart.Spec
	chart := &sourcev1.HelmChart{
		TypeMeta:   metav1.TypeMeta{APIVersion: sourcev1.GroupVersion.String(), Kind: sourcev1.HelmChartKind},
		ObjectMeta: templateMeta(obj, ref),
		Spec: sourcev1.HelmChartSpec{
			Chart:                    spec.Chart,
			Version:                  spec.GetVersion(),
			Interval:                 obj.GetTemplateInterval(),
			ReconcileStrategy:        spec.GetReconcileStrategy(),
			ValuesFiles:              spec.ValuesFiles,
			IgnoreMissingValuesFiles: spec.IgnoreMissingValuesFiles,
		},
	}
	if src := spec.SourceRef; src != nil {
		// Kind and name only, as upstream writes them (no apiVersion).
		chart.Spec.SourceRef = sourcev1.LocalHelmChartSourceReference{Kind: src.Kind, Name: src.Name}
	}
	if v := spec.Verify; v != nil {
		chart.Spec.Verify = &sourcev1.HelmChartVerification{Provider: v.Provider, SecretRef: v.SecretRef}
	}
	return chart
}

// ociRepositoryFromTemplate is the OCIRepository the template of obj asks
// for: the OCIRepository fields of the template, with the template's
// interval (else spec.interval) and, unless the template selects a layer,
// the Helm chart layer copied as it is, so the artifact is the chart
// package itself.
func ociRepositoryFromTemplate(obj *v2.HelmRelease, ref *helmv2.HelmChartReference) *sourcev1.OCIRepository {
	spec := obj.Spec.Chart.Spec.OCIRepositorySpec.DeepCopy()
	interval := obj.GetTemplateInterval()
	spec.Interval = &interval
	if spec.LayerSelector == nil {
		spec.LayerSelector = &sourcev1.OCILayerSelector{MediaType: registry.ChartLayerMediaType, Operation: sourcev1.OCILayerCopy}
	}
	return &sourcev1.OCIRepository{
		TypeMeta:   metav1.TypeMeta{APIVersion: sourcev1.GroupVersion.String(), Kind: sourcev1.OCIRepositoryKind},
		ObjectMeta: templateMeta(obj, ref),
		Spec:       *spec,
	}
}

// applyTemplateSource writes the object with server-side apply as upstream
// does: same field manager, same owner labels naming the HelmRelease, so
// either controller can take the object over from the other. Fields an
// older build of this controller set with a merge patch are handed over to
// the apply.
func (r *HelmReleaseReconciler) applyTemplateSource(ctx context.Context, obj *v2.HelmRelease, desired client.Object) (*ssa.ChangeSetEntry, error) {
	raw, err := runtime.DefaultUnstructuredConverter.ToUnstructured(desired)
	if err != nil {
		return nil, fmt.Errorf("converting the %T: %w", desired, err)
	}
	u := &unstructured.Unstructured{Object: raw}
	manager := r.FieldManager
	if manager == "" {
		manager = ControllerName
	}
	rm := ssa.NewResourceManager(r.Client, nil, ssa.Owner{Group: helmv2.GroupVersion.Group, Field: manager})
	rm.SetOwnerLabels([]*unstructured.Unstructured{u}, obj.Name, obj.Namespace)
	key := client.ObjectKeyFromObject(obj)
	want, err := json.Marshal(u.Object)
	if err != nil {
		return nil, fmt.Errorf("encoding the %T: %w", desired, err)
	}
	current := desired.DeepCopyObject().(client.Object)
	if err := r.Get(ctx, client.ObjectKeyFromObject(desired), current); err != nil {
		current = nil
	}
	if r.appliedSources.unchanged(key, want, current) {
		return &ssa.ChangeSetEntry{Subject: ssautil.FmtUnstructured(u), Action: ssa.UnchangedAction}, nil
	}
	opts := ssa.DefaultApplyOptions()
	opts.Cleanup.FieldManagers = []ssa.FieldManager{{Name: manager, ExactMatch: true, OperationType: metav1.ManagedFieldsOperationUpdate}}
	entry, err := rm.Apply(ctx, u, opts)
	if err == nil && entry.Action == ssa.UnchangedAction {
		r.appliedSources.record(key, want, current)
	} else {
		r.appliedSources.forget(key)
	}
	return entry, err
}

// appliedSources remembers, per HelmRelease, the template source a
// server-side apply last found unchanged, and the object's generation,
// labels and annotations as the cache showed it then, so that a reconcile
// that asks for the same object, and finds it as it was, applies nothing.
// Any change of the object's spec (its generation), labels or annotations,
// or its replacement (its UID), shows in the cache and makes the next
// reconcile apply again, as does a change of what the template asks for.
type appliedSources struct{ perRelease[appliedSource] }

type appliedSource struct {
	want       [sha256.Size]byte
	uid        types.UID
	generation int64
	metadata   [sha256.Size]byte
}

func (a *appliedSources) unchanged(key types.NamespacedName, want []byte, current client.Object) bool {
	if current == nil {
		return false
	}
	got, ok := a.get(key)
	return ok && got == sourceState(want, current)
}

func (a *appliedSources) record(key types.NamespacedName, want []byte, current client.Object) {
	if current == nil {
		a.forget(key)
		return
	}
	a.set(key, sourceState(want, current))
}

// sourceState is the applied object want and the state of current that a
// change by anyone else would alter.
func sourceState(want []byte, current client.Object) appliedSource {
	// encoding/json writes map keys sorted: equal maps, equal bytes.
	metadata, _ := json.Marshal([]map[string]string{current.GetLabels(), current.GetAnnotations()})
	return appliedSource{want: sha256.Sum256(want), uid: current.GetUID(), generation: current.GetGeneration(), metadata: sha256.Sum256(metadata)}
}

// deleteStaleChart removes the object recorded in the status when the
// template now asks for another one (another kind, namespace or name).
func (r *HelmReleaseReconciler) deleteStaleChart(ctx context.Context, obj *v2.HelmRelease, want *helmv2.HelmChartReference) error {
	old := obj.Status.GetHelmChartReference()
	if old == nil || old.Matches(want) {
		return nil
	}
	return r.deleteChart(ctx, obj, old)
}

// deleteChartTemplate removes the object of a chart template that is no
// longer used (switch to chartRef, or deletion).
func (r *HelmReleaseReconciler) deleteChartTemplate(ctx context.Context, obj *v2.HelmRelease) error {
	old := obj.Status.GetHelmChartReference()
	if old == nil {
		return nil
	}
	return r.deleteChart(ctx, obj, old)
}

// deleteChart deletes the object ref names, by its kind, and clears the
// status. Kinds a template cannot make are not deleted: status.helmChart
// only ever names what this controller or upstream's made.
func (r *HelmReleaseReconciler) deleteChart(ctx context.Context, obj *v2.HelmRelease, ref *helmv2.HelmChartReference) error {
	var src client.Object
	switch ref.Kind {
	case sourcev1.HelmChartKind:
		src = &sourcev1.HelmChart{}
	case sourcev1.OCIRepositoryKind:
		src = &sourcev1.OCIRepository{}
	default:
		setChartStatus(obj, nil)
		return nil
	}
	src.SetNamespace(ref.Namespace)
	src.SetName(ref.Name)
	switch err := r.Delete(ctx, src); {
	case err == nil:
		r.traceEvent(obj, ref.Kind+"Deleted", fmt.Sprintf("deleted %s '%s/%s'", ref.Kind, ref.Namespace, ref.Name))
	case !apierrors.IsNotFound(err):
		return fmt.Errorf("failed to delete '%s': %w", ref, err)
	}
	setChartStatus(obj, nil)
	return nil
}

// traceEvent records one of upstream's chart template events: a Kubernetes
// event only, never sent to notification-controller.
func (r *HelmReleaseReconciler) traceEvent(obj *v2.HelmRelease, reason, msg string) {
	r.EventRecorder.Eventf(obj, nil, eventv1.EventTypeTrace, reason, helmv2.ActionResolveSource.String(), "%s", msg)
}
