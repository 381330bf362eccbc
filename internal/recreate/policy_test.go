package recreate

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// fakeObject is an object of the cluster that exists (live) until
// deleted, then for `lingers` more reads.
type fakeObject struct {
	live      *unstructured.Unstructured
	dryRunErr error
	deleteErr error
	lingers   int
	deleted   []metav1.DeletionPropagation
	// created, when set, is the object a create makes.
	created *unstructured.Unstructured
}

func (o *fakeObject) Live(context.Context) (*unstructured.Unstructured, error) {
	if o.live == nil {
		return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "jobs"}, "migrate")
	}
	if len(o.deleted) > 0 {
		if o.lingers == 0 {
			o.live = nil
			return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "jobs"}, "migrate")
		}
		o.lingers--
	}
	return o.live, nil
}

func (o *fakeObject) DryRunCreate(context.Context) error { return o.dryRunErr }

func (o *fakeObject) Delete(_ context.Context, uid types.UID, p metav1.DeletionPropagation) error {
	if o.deleteErr != nil {
		return o.deleteErr
	}
	if uid != o.live.GetUID() {
		return apierrors.NewConflict(schema.GroupResource{Resource: "jobs"}, "migrate", errors.New("uid precondition"))
	}
	o.deleted = append(o.deleted, p)
	return nil
}

// fakeDependents owns what it is given: owners, or owned under the UID
// "a" of the objects the tests recreate.
type fakeDependents struct {
	owners Owners
	owned  []Dependent
	err    error
}

func (d *fakeDependents) Owned(context.Context, *unstructured.Unstructured) (Owners, error) {
	if d.owners != nil {
		return d.owners, d.err
	}
	return Owners{"a": d.owned}, d.err
}

// object returns an Unstructured of kind gk with annotations and
// finalizers.
func object(gk schema.GroupKind, uid types.UID, annotations map[string]string, finalizers ...string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{}}
	u.SetGroupVersionKind(gk.WithVersion("v1"))
	u.SetNamespace("shop")
	u.SetName("migrate")
	u.SetUID(uid)
	u.SetAnnotations(annotations)
	u.SetFinalizers(finalizers)
	if gk == jobKind {
		setJobStatus(u, 0, "Complete")
	}
	return u
}

// setJobStatus gives a Job active pods and, unless condition is "", that
// condition True, as the Job controller writes them.
func setJobStatus(u *unstructured.Unstructured, active int64, condition string) *unstructured.Unstructured {
	status := map[string]any{}
	if active > 0 {
		status["active"] = active
	}
	if condition != "" {
		status["conditions"] = []any{
			map[string]any{"type": "SuccessCriteriaMet", "status": "True"},
			map[string]any{"type": condition, "status": "True"},
		}
	}
	u.Object["status"] = status
	return u
}

var (
	crKind          = schema.GroupKind{Group: "db.example.com", Kind: "Database"}
	alreadyThere    = apierrors.NewAlreadyExists(schema.GroupResource{Group: "batch", Resource: "jobs"}, "migrate")
	templateRefusal = apierrors.NewInvalid(jobKind, "migrate", field.ErrorList{
		field.Invalid(field.NewPath("spec", "template"), "x", "field is immutable")})
	sizeRefusal = apierrors.NewInvalid(crKind, "migrate", field.ErrorList{
		field.Invalid(field.NewPath("spec", "size"), "2Gi", "size is immutable")})
	enabled      = map[string]string{Annotation: Enabled}
	releaseOfOwn = map[string]string{releaseNameAnno: "shop", releaseNamespaceAnno: "shop"}
)

// dep is a dependent in the namespace shop, its UID its name.
func dep(gk schema.GroupKind, name string) Dependent {
	return Dependent{Kind: gk, Namespace: "shop", Name: name, UID: types.UID(name)}
}

func merged(maps ...map[string]string) map[string]string {
	out := map[string]string{}
	for _, m := range maps {
		for k, v := range m {
			out[k] = v
		}
	}
	return out
}

func TestPolicyRecreate(t *testing.T) {
	tests := []struct {
		name      string
		policy    Policy
		kind      schema.GroupKind
		cause     error
		desired   map[string]string // manifest annotations
		live      *unstructured.Unstructured
		dryRunErr error
		owned     []Dependent
		ownedErr  error
		createErr error
		ctxDone   bool
		// wantErr is a part of the error; "" means recreated.
		wantErr     string
		wantNot     string // a part the error must not have
		wantDeleted bool
		wantCreated bool
	}{
		{name: "annotated: recreated", kind: jobKind, cause: templateRefusal, desired: enabled,
			live: object(jobKind, "a", releaseOfOwn), wantDeleted: true, wantCreated: true},
		{name: "no consent: advice names the annotation and the gate", kind: jobKind, cause: templateRefusal,
			live: object(jobKind, "a", nil), wantErr: `Job/shop/migrate: spec.template: Invalid value: "x": field is immutable; annotate it helm.toolkit.fluxcd.io/force: enabled (or turn on the RecreateImmutableResources feature gate)`},
		{name: "gate covers a Job's template", policy: Policy{Gate: true}, kind: jobKind, cause: templateRefusal,
			live: object(jobKind, "a", nil), wantDeleted: true, wantCreated: true},
		{name: "gate does not cover a custom resource", policy: Policy{Gate: true}, kind: crKind, cause: sizeRefusal,
			live: object(crKind, "a", nil), wantErr: "; annotate it helm.toolkit.fluxcd.io/force: enabled to let", wantNot: "feature gate"},
		{name: "manifest opts out: nothing read", policy: Policy{Gate: true}, kind: jobKind, cause: templateRefusal,
			desired: map[string]string{Annotation: Disabled}, live: object(jobKind, "a", nil), wantErr: "; it opts out of recreation (helm.toolkit.fluxcd.io/force: disabled)"},
		{name: "PVC never", kind: schema.GroupKind{Kind: "PersistentVolumeClaim"}, cause: templateRefusal, desired: enabled,
			live: object(jobKind, "a", nil), wantErr: "PersistentVolumeClaim is never recreated"},
		{name: "keep in the manifest", kind: jobKind, cause: templateRefusal, desired: merged(enabled, map[string]string{resourcePolicy: "keep"}),
			live: object(jobKind, "a", nil), wantErr: "not recreated: its manifest says helm.sh/resource-policy: keep", wantNot: "annotate"},
		{name: "keep in the cluster, no consent: no advice", kind: jobKind, cause: templateRefusal,
			live: object(jobKind, "a", map[string]string{resourcePolicy: " Keep"}), wantErr: "the object in the cluster says helm.sh/resource-policy: keep", wantNot: "annotate"},
		{name: "disabled in the cluster", kind: jobKind, cause: templateRefusal, desired: enabled,
			live: object(jobKind, "a", map[string]string{Annotation: Disabled}), wantErr: "the object in the cluster says helm.toolkit.fluxcd.io/force: disabled"},
		{name: "another release's", policy: Policy{Release: Release{Name: "shop", Namespace: "shop"}}, kind: jobKind, cause: templateRefusal, desired: enabled,
			live: object(jobKind, "a", map[string]string{releaseNameAnno: "other", releaseNamespaceAnno: "shop"}), wantErr: "it belongs to release shop/other"},
		{name: "same release", policy: Policy{Release: Release{Name: "shop", Namespace: "shop"}}, kind: jobKind, cause: templateRefusal, desired: enabled,
			live: object(jobKind, "a", releaseOfOwn), wantDeleted: true, wantCreated: true},
		{name: "external finalizer", kind: jobKind, cause: templateRefusal, desired: enabled,
			live: object(jobKind, "a", nil, "example.com/cleanup", metav1.FinalizerOrphanDependents), wantErr: "it has the finalizer example.com/cleanup:"},
		{name: "garbage collector's finalizer", kind: jobKind, cause: templateRefusal, desired: enabled,
			live: object(jobKind, "a", nil, metav1.FinalizerDeleteDependents), wantDeleted: true, wantCreated: true},
		{name: "owns a PVC", kind: jobKind, cause: templateRefusal, desired: enabled, live: object(jobKind, "a", nil),
			owned: []Dependent{dep(pvcKind, "data")}, wantErr: "it owns PersistentVolumeClaim/shop/data, whose data a recreate would delete"},
		{name: "custom resource owning anything", kind: crKind, cause: sizeRefusal, desired: enabled, live: object(crKind, "a", nil),
			owned:   []Dependent{dep(stsKind, "d"), dep(schema.GroupKind{Kind: "Service"}, "c"), dep(schema.GroupKind{Kind: "ConfigMap"}, "b"), dep(schema.GroupKind{Kind: "Secret"}, "s")},
			wantErr: "it owns ConfigMap/shop/b, Secret/shop/s, Service/shop/c and 1 more, which a recreate would delete"},
		{name: "dependents unknown", kind: jobKind, cause: templateRefusal, desired: enabled, live: object(jobKind, "a", nil),
			ownedErr: errors.New("listing persistentvolumeclaims: forbidden"), wantErr: "not recreated: finding what it owns: listing persistentvolumeclaims: forbidden"},
		{name: "new version invalid: no advice", kind: jobKind, cause: templateRefusal, live: object(jobKind, "a", nil),
			dryRunErr: apierrors.NewInvalid(jobKind, "migrate", nil), wantErr: "would not be accepted as a new object either", wantNot: "annotate"},
		{name: "create fails after the delete", kind: jobKind, cause: templateRefusal, desired: enabled, live: object(jobKind, "a", nil),
			createErr: errors.New("quota"), wantErr: "; it was deleted to be recreated, but creating it failed: quota", wantDeleted: true, wantCreated: true},
		{name: "gone already: created, nothing deleted", kind: jobKind, cause: templateRefusal, wantCreated: true},
		{name: "gone, create fails: not said deleted", kind: jobKind, cause: templateRefusal, createErr: errors.New("quota"),
			wantErr: "it was gone before it could be recreated, and creating it failed: quota", wantNot: "deleted", wantCreated: true},
		{name: "running Job, annotated: refused", kind: jobKind, cause: templateRefusal, desired: enabled,
			live: setJobStatus(object(jobKind, "a", nil), 2, ""), wantErr: "not recreated: it is a Job that is still running (2 active pods): recreating it would stop it halfway; it is recreated on the next attempt after it has finished"},
		{name: "running Job under the gate: refused, no advice", policy: Policy{Gate: true}, kind: jobKind, cause: templateRefusal,
			live: setJobStatus(object(jobKind, "a", nil), 1, ""), wantErr: "still running (1 active pods)", wantNot: "annotate"},
		{name: "Job not started or suspended: refused", kind: jobKind, cause: templateRefusal, desired: enabled,
			live: setJobStatus(object(jobKind, "a", nil), 0, ""), wantErr: "it is a Job that has not finished (neither Complete nor Failed)"},
		{name: "Job Failed but a pod still terminating: refused", kind: jobKind, cause: templateRefusal, desired: enabled,
			live: setJobStatus(object(jobKind, "a", nil), 1, "Failed"), wantErr: "still running (1 active pods)"},
		{name: "failed Job: recreated", kind: jobKind, cause: templateRefusal, desired: enabled,
			live: setJobStatus(object(jobKind, "a", nil), 0, "Failed"), wantDeleted: true, wantCreated: true},
		{name: "shut down before the delete", kind: jobKind, cause: templateRefusal, desired: enabled, live: object(jobKind, "a", nil),
			ctxDone: true, wantErr: "not recreated: ", wantNot: "deleted"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dryRunErr := tt.dryRunErr
			if dryRunErr == nil {
				dryRunErr = alreadyThere
			}
			cluster := &fakeObject{live: tt.live, dryRunErr: dryRunErr}
			deps := &fakeDependents{owned: tt.owned, err: tt.ownedErr}
			r := Refused{Object: "Job/shop/migrate", Kind: tt.kind, Desired: object(tt.kind, "", tt.desired), Cause: tt.cause,
				Cluster: cluster, Dependents: deps}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if tt.ctxDone {
				cancel()
			}
			created := false
			done, err := tt.policy.Recreate(ctx, r, func(context.Context) error { created = true; return tt.createErr })
			if created != tt.wantCreated || (len(cluster.deleted) > 0) != tt.wantDeleted {
				t.Errorf("created %v, deleted %v; want %v, %v", created, cluster.deleted, tt.wantCreated, tt.wantDeleted)
			}
			if tt.wantErr == "" {
				if err != nil || done.Object != "Job/shop/migrate" || done.Fields == "" {
					t.Fatalf("Recreate = %+v, %v; want recreated", done, err)
				}
				return
			}
			var ierr *ImmutableError
			if !errors.As(err, &ierr) || !errors.Is(err, tt.cause) || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("Recreate = %v, want an ImmutableError wrapping the refusal, containing %q", err, tt.wantErr)
			}
			if tt.wantNot != "" && strings.Contains(err.Error(), tt.wantNot) {
				t.Errorf("error %q must not contain %q", err, tt.wantNot)
			}
		})
	}
}

// A recreate waits for the old object to go only until ctx ends, and says
// it deleted it.
func TestRecreateWaitEndsWithContext(t *testing.T) {
	cluster := &fakeObject{live: object(jobKind, "a", nil), dryRunErr: alreadyThere, lingers: 1 << 30}
	r := Refused{Object: "Job/shop/migrate", Kind: jobKind, Desired: object(jobKind, "", enabled), Cause: templateRefusal,
		Cluster: cluster, Dependents: &fakeDependents{}}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := Policy{}.Recreate(ctx, r, func(context.Context) error { t.Error("created before the old one was gone"); return nil })
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("returned after %s, want soon after the context ended", took)
	}
	if err == nil || !strings.Contains(err.Error(), "it was deleted to be recreated, but it was not gone in time") {
		t.Errorf("Recreate = %v", err)
	}
}

// An object recreated from a manifest and refused again for the same
// manifest is not recreated a second time; another manifest, or another
// object, is.
func TestRecreateRefusedAgainStops(t *testing.T) {
	mem := NewMemory()
	policy := Policy{Memory: mem}
	desired := object(jobKind, "", enabled)
	newObject := object(jobKind, "b", nil)
	cluster := &fakeObject{live: object(jobKind, "a", nil), dryRunErr: alreadyThere}
	r := Refused{Object: "Job/shop/migrate", Kind: jobKind, Desired: desired, Cause: templateRefusal, Cluster: cluster, Dependents: &fakeDependents{}}
	create := func(context.Context) error { cluster.live, cluster.deleted = newObject, nil; return nil }
	if _, err := policy.Recreate(context.Background(), r, create); err != nil {
		t.Fatalf("first recreate: %v", err)
	}
	_, err := policy.Recreate(context.Background(), r, create)
	if err == nil || !strings.Contains(err.Error(), "not recreated again: it was recreated at ") || len(cluster.deleted) > 0 {
		t.Fatalf("second recreate of the same object and manifest: %v (deleted %v); want it refused", err, cluster.deleted)
	}
	other := r
	other.Desired = object(jobKind, "", merged(enabled, map[string]string{"v": "2"}))
	if _, err := policy.Recreate(context.Background(), other, create); err != nil {
		t.Errorf("a new manifest: %v, want recreated", err)
	}
}

func TestGateCovers(t *testing.T) {
	refusal := func(gk schema.GroupKind, paths ...*field.Path) error {
		var errs field.ErrorList
		for _, p := range paths {
			errs = append(errs, field.Invalid(p, "x", "field is immutable"))
		}
		return apierrors.NewInvalid(gk, "x", errs)
	}
	svc := schema.GroupKind{Kind: "Service"}
	deploy := schema.GroupKind{Group: "apps", Kind: "Deployment"}
	tests := []struct {
		name  string
		kind  schema.GroupKind
		cause error
		want  bool
	}{
		{name: "Job template", kind: jobKind, cause: templateRefusal, want: true},
		{name: "Service clusterIPs[0]", kind: svc, cause: refusal(svc, field.NewPath("spec", "clusterIPs").Index(0)), want: true},
		{name: "Deployment selector", kind: deploy, cause: refusal(deploy, field.NewPath("spec", "selector")), want: true},
		{name: "Deployment selector and something else", kind: deploy, cause: refusal(deploy, field.NewPath("spec", "selector"), field.NewPath("spec", "strategy"))},
		{name: "ConfigMap data key", kind: schema.GroupKind{Kind: "ConfigMap"}, cause: refusal(schema.GroupKind{Kind: "ConfigMap"}, field.NewPath("data").Key("a")), want: true},
		{name: "RoleBinding roleRef", kind: schema.GroupKind{Group: "rbac.authorization.k8s.io", Kind: "RoleBinding"},
			cause: refusal(schema.GroupKind{Group: "rbac.authorization.k8s.io", Kind: "RoleBinding"}, field.NewPath("roleRef")), want: true},
		{name: "StatefulSet", kind: stsKind, cause: refusal(stsKind, field.NewPath("spec"))},
		{name: "custom resource", kind: crKind, cause: sizeRefusal},
		{name: "no field named", kind: jobKind, cause: errors.New("admission webhook denied: spec.template is immutable")},
		{name: "a cause without a field", kind: jobKind, cause: apierrors.NewInvalid(jobKind, "x", field.ErrorList{field.Invalid(nil, "x", "no")})},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := gateCovers(tt.kind, tt.cause); got != tt.want {
				t.Errorf("gateCovers = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestStatefulSetSelectorGuard(t *testing.T) {
	sts := func(selector map[string]any) *unstructured.Unstructured {
		u := object(stsKind, "a", nil)
		_ = unstructured.SetNestedMap(u.Object, selector, "spec", "selector")
		return u
	}
	old := map[string]any{"matchLabels": map[string]any{"app": "db"}}
	changed := map[string]any{"matchLabels": map[string]any{"app": "db", "tier": "data"}}
	if why := statefulSetSelector(Refused{Kind: stsKind, Desired: sts(old)}, sts(old)); why != "" {
		t.Errorf("same selector refused: %s", why)
	}
	if why := statefulSetSelector(Refused{Kind: stsKind, Desired: sts(changed)}, sts(old)); !strings.Contains(why, "its selector changes") {
		t.Errorf("changed selector: %q", why)
	}
}

func TestPropagation(t *testing.T) {
	if got := Propagation(stsKind); got != metav1.DeletePropagationOrphan {
		t.Errorf("StatefulSet: %s", got)
	}
	for _, gk := range []schema.GroupKind{jobKind, {Group: "apps", Kind: "Deployment"}, {Kind: "Service"}, crKind} {
		if got := Propagation(gk); got != metav1.DeletePropagationBackground {
			t.Errorf("%s: %s", gk, got)
		}
	}
}
