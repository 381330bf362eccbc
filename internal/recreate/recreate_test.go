package recreate

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
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
