package recreate

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"helm.sh/helm/v4/pkg/kube"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/cli-runtime/pkg/resource"
)

var (
	jobKind = schema.GroupKind{Group: "batch", Kind: "Job"}
	stsKind = schema.GroupKind{Group: "apps", Kind: "StatefulSet"}
	pvcKind = schema.GroupKind{Kind: "PersistentVolumeClaim"}
)

func TestPolicyAllows(t *testing.T) {
	tests := []struct {
		name       string
		policy     Policy
		kind       schema.GroupKind
		annotation string
		want       bool
		advice     string
	}{
		{name: "enabled", kind: jobKind, annotation: Enabled, want: true},
		{name: "unannotated", kind: jobKind, advice: "annotate it helm.toolkit.fluxcd.io/force: enabled to let"},
		{name: "unannotated, with a setting", policy: Policy{Setting: "spec.upgrade.force"}, kind: jobKind, advice: "(or set spec.upgrade.force)"},
		{name: "all", policy: Policy{All: true}, kind: jobKind, want: true},
		{name: "all, opted out", policy: Policy{All: true}, kind: jobKind, annotation: Disabled, advice: "opts out"},
		{name: "other value", kind: jobKind, annotation: "yes", advice: "annotate it"},
		{name: "PVC, even annotated", kind: pvcKind, annotation: Enabled, advice: "PersistentVolumeClaim is never recreated"},
		{name: "CRD under all", policy: Policy{All: true}, kind: schema.GroupKind{Group: "apiextensions.k8s.io", Kind: "CustomResourceDefinition"}, advice: "never recreated"},
		{name: "Namespace", kind: schema.GroupKind{Kind: "Namespace"}, annotation: Enabled, advice: "never recreated"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var ann map[string]string
			if tt.annotation != "" {
				ann = map[string]string{Annotation: tt.annotation}
			}
			got, advice := tt.policy.Allows(tt.kind, ann)
			if got != tt.want || !strings.Contains(advice, tt.advice) || (got && advice != "") {
				t.Errorf("Allows = %v, %q; want %v, advice containing %q", got, advice, tt.want, tt.advice)
			}
		})
	}
}

func TestFields(t *testing.T) {
	long := strings.Repeat("x", 500)
	tests := []struct {
		name string
		err  error
		want string
	}{
		{
			name: "immutable pod template, value dropped",
			err: apierrors.NewInvalid(jobKind, "migrate", field.ErrorList{
				field.Invalid(field.NewPath("spec", "template"), map[string]string{"image": long}, "field is immutable"),
			}),
			want: "spec.template: field is immutable",
		},
		{
			name: "two causes",
			err: apierrors.NewInvalid(stsKind, "db", field.ErrorList{
				field.Forbidden(field.NewPath("spec"), "updates to statefulset spec are forbidden"),
				field.Invalid(field.NewPath("spec", "selector"), "a", "field is immutable"),
			}),
			want: `spec: Forbidden: updates to statefulset spec are forbidden, spec.selector: Invalid value: "a": field is immutable`,
		},
		{name: "no status", err: errors.New("webhook: the field is immutable"), want: "webhook: the field is immutable"},
		{name: "long message without reason", err: errors.New(long), want: strings.Repeat("x", maxCause) + "…"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Fields(tt.err); got != tt.want {
				t.Errorf("Fields = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestPropagation(t *testing.T) {
	if got := Propagation(stsKind); got != metav1.DeletePropagationOrphan {
		t.Errorf("StatefulSet: %s", got)
	}
	for _, gk := range []schema.GroupKind{jobKind, {Group: "apps", Kind: "Deployment"}, {Kind: "Service"}} {
		if got := Propagation(gk); got != metav1.DeletePropagationBackground {
			t.Errorf("%s: %s", gk, got)
		}
	}
}

// fakeObject is an object that exists (uid) until deleted, then for
// `lingers` more reads.
type fakeObject struct {
	uid       types.UID
	dryRunErr error
	lingers   int
	deleted   []metav1.DeletionPropagation
	reads     int
}

func (o *fakeObject) UID(context.Context) (types.UID, error) {
	o.reads++
	if o.uid == "" {
		return "", apierrors.NewNotFound(schema.GroupResource{Resource: "jobs"}, "migrate")
	}
	if len(o.deleted) > 0 {
		if o.lingers == 0 {
			o.uid = ""
		} else {
			o.lingers--
		}
	}
	return o.uid, nil
}

func (o *fakeObject) DryRunCreate(context.Context) error { return o.dryRunErr }

func (o *fakeObject) Delete(_ context.Context, uid types.UID, p metav1.DeletionPropagation) error {
	if uid != o.uid {
		return apierrors.NewConflict(schema.GroupResource{Resource: "jobs"}, "migrate", errors.New("uid precondition"))
	}
	o.deleted = append(o.deleted, p)
	return nil
}

func TestReplace(t *testing.T) {
	exists := apierrors.NewAlreadyExists(schema.GroupResource{Group: "batch", Resource: "jobs"}, "migrate")
	invalid := apierrors.NewInvalid(jobKind, "migrate", field.ErrorList{field.Required(field.NewPath("spec", "template"), "")})
	tests := []struct {
		name        string
		obj         *fakeObject
		kind        schema.GroupKind
		wantErr     string
		wantDeleted []metav1.DeletionPropagation
	}{
		{name: "gone already", obj: &fakeObject{}, kind: jobKind},
		{name: "deleted and waited for", obj: &fakeObject{uid: "a", dryRunErr: exists, lingers: 3}, kind: jobKind,
			wantDeleted: []metav1.DeletionPropagation{metav1.DeletePropagationBackground}},
		{name: "StatefulSet orphans", obj: &fakeObject{uid: "a", dryRunErr: exists}, kind: stsKind,
			wantDeleted: []metav1.DeletionPropagation{metav1.DeletePropagationOrphan}},
		{name: "new version invalid: nothing deleted", obj: &fakeObject{uid: "a", dryRunErr: invalid}, kind: jobKind,
			wantErr: "new version would not be accepted"},
		{name: "dry run accepted: nothing deleted", obj: &fakeObject{uid: "a"}, kind: jobKind,
			wantErr: "did not see the existing object"},
		{name: "never gone", obj: &fakeObject{uid: "a", dryRunErr: exists, lingers: 1 << 30}, kind: jobKind,
			wantErr: "waiting for it to be deleted", wantDeleted: []metav1.DeletionPropagation{metav1.DeletePropagationBackground}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			err := Replace(ctx, tt.obj, tt.kind)
			if tt.wantErr == "" && err != nil || tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
				t.Fatalf("Replace = %v, want error containing %q", err, tt.wantErr)
			}
			if len(tt.obj.deleted) != len(tt.wantDeleted) || (len(tt.wantDeleted) > 0 && tt.obj.deleted[0] != tt.wantDeleted[0]) {
				t.Errorf("deleted with %v, want %v", tt.obj.deleted, tt.wantDeleted)
			}
		})
	}
}

func TestIsImmutable(t *testing.T) {
	tests := []struct {
		err  error
		want bool
	}{
		{err: nil},
		{err: apierrors.NewInvalid(jobKind, "m", nil), want: true},
		{err: errors.New("admission webhook denied: spec.size is immutable"), want: true},
		{err: apierrors.NewForbidden(schema.GroupResource{Resource: "jobs"}, "m", errors.New("rbac")), want: false},
		{err: apierrors.NewNotFound(schema.GroupResource{Resource: "jobs"}, "m"), want: false},
		{err: apierrors.NewConflict(schema.GroupResource{Group: "apps", Resource: "deployments"}, "web",
			errors.New("the object has been modified; please apply your changes to the latest version and try again")), want: false},
		{err: apierrors.NewConflict(schema.GroupResource{Resource: "services"}, "web", errors.New("field is immutable")), want: true},
	}
	for _, tt := range tests {
		if got := IsImmutable(tt.err); got != tt.want {
			t.Errorf("IsImmutable(%v) = %v", tt.err, got)
		}
	}
}

func TestRefusedFindsTheObject(t *testing.T) {
	info := func(group, version, kind, resourceName, ns, name string) *resource.Info {
		return &resource.Info{Namespace: ns, Name: name, Mapping: &meta.RESTMapping{
			GroupVersionKind: schema.GroupVersionKind{Group: group, Version: version, Kind: kind},
			Resource:         schema.GroupVersionResource{Group: group, Version: version, Resource: resourceName},
		}}
	}
	job := info("batch", "v1", "Job", "jobs", "shop", "migrate")
	svc := info("", "v1", "Service", "services", "shop", "web")
	otherJob := info("batch", "v1", "Job", "jobs", "other", "migrate")
	target := kube.ResourceList{job, svc}
	invalidJob := apierrors.NewInvalid(jobKind, "migrate", field.ErrorList{field.Invalid(field.NewPath("spec", "template"), "x", "field is immutable")})
	policyDenied := &apierrors.StatusError{ErrStatus: metav1.Status{Status: metav1.StatusFailure, Code: 422, Reason: metav1.StatusReasonInvalid,
		Message: "ValidatingAdmissionPolicy 'p' denied request: web is immutable",
		Details: &metav1.StatusDetails{Name: "web", Kind: "services"}}}
	webhook := &apierrors.StatusError{ErrStatus: metav1.Status{Status: metav1.StatusFailure, Code: 400, Reason: metav1.StatusReasonBadRequest,
		Message: `admission webhook "guard" denied the request: spec.size is immutable`}}
	tests := []struct {
		name   string
		target kube.ResourceList
		err    error
		want   *resource.Info
	}{
		{name: "invalid, by kind and name", target: target, err: fmt.Errorf("server-side apply failed for object shop/migrate batch/v1, Kind=Job: %w", invalidJob), want: job},
		{name: "admission policy, by resource", target: target, err: policyDenied, want: svc},
		{name: "webhook without details, server-side", target: target,
			err: fmt.Errorf("server-side apply failed for object shop/web /v1, Kind=Service: %w", webhook), want: svc},
		{name: "webhook without details, client-side", target: target,
			err: fmt.Errorf("cannot patch %q with kind Job: %w", "migrate", webhook), want: job},
		{name: "not immutable", target: target, err: apierrors.NewForbidden(schema.GroupResource{Group: "batch", Resource: "jobs"}, "migrate", errors.New("rbac"))},
		{name: "same kind and name in two namespaces, told apart by Helm's message", target: kube.ResourceList{otherJob, job},
			err: fmt.Errorf("server-side apply failed for object shop/migrate batch/v1, Kind=Job: %w", invalidJob), want: job},
		{name: "same kind and name in two namespaces, no way to tell", target: kube.ResourceList{otherJob, job}, err: invalidJob},
		{name: "not in target", target: kube.ResourceList{svc}, err: invalidJob},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := refused(tt.target, tt.err); got != tt.want {
				t.Errorf("refused = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestPolicyRecreate(t *testing.T) {
	exists := apierrors.NewAlreadyExists(schema.GroupResource{Group: "batch", Resource: "jobs"}, "migrate")
	cause := apierrors.NewInvalid(jobKind, "migrate", field.ErrorList{field.Invalid(field.NewPath("spec", "template"), "x", "field is immutable")})
	tests := []struct {
		name       string
		annotation string
		cluster    *fakeObject
		createErr  error
		wantErr    string
		wantCreate bool
	}{
		{name: "recreated", annotation: Enabled, cluster: &fakeObject{uid: "a", dryRunErr: exists}, wantCreate: true},
		{name: "not allowed: nothing deleted", cluster: &fakeObject{uid: "a", dryRunErr: exists},
			wantErr: `Job/shop/migrate: spec.template: Invalid value: "x": field is immutable; annotate it`},
		{name: "replace fails", annotation: Enabled, cluster: &fakeObject{uid: "a"}, wantErr: "; recreating it failed: "},
		{name: "create fails", annotation: Enabled, cluster: &fakeObject{uid: "a", dryRunErr: exists}, createErr: errors.New("quota"),
			wantErr: "; it was deleted to be recreated, but creating it failed: quota", wantCreate: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var ann map[string]string
			if tt.annotation != "" {
				ann = map[string]string{Annotation: tt.annotation}
			}
			created := false
			r := Refused{Object: "Job/shop/migrate", Kind: jobKind, Annotations: ann, Cause: cause, Cluster: tt.cluster}
			done, err := Policy{}.Recreate(context.Background(), r, func(context.Context) error { created = true; return tt.createErr })
			if created != tt.wantCreate {
				t.Errorf("created %v, want %v", created, tt.wantCreate)
			}
			if tt.wantErr != "" {
				var ierr *ImmutableError
				if !errors.As(err, &ierr) || !strings.Contains(err.Error(), tt.wantErr) || !errors.Is(err, cause) {
					t.Fatalf("Recreate = %v, want an ImmutableError containing %q that wraps the refusal", err, tt.wantErr)
				}
				if tt.annotation == "" && len(tt.cluster.deleted) > 0 {
					t.Error("deleted an object the policy does not allow to recreate")
				}
				return
			}
			if err != nil || done != (Recreated{Object: "Job/shop/migrate", Fields: `spec.template: Invalid value: "x": field is immutable`, Propagation: metav1.DeletePropagationBackground}) {
				t.Errorf("Recreate = %+v, %v", done, err)
			}
			if len(tt.cluster.deleted) != 1 {
				t.Errorf("deleted %d times, want once", len(tt.cluster.deleted))
			}
		})
	}
}
