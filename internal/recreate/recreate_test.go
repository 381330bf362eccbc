package recreate

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"helm.sh/helm/v4/pkg/kube"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/cli-runtime/pkg/resource"
)

var (
	stsKind = schema.GroupKind{Group: "apps", Kind: "StatefulSet"}
	pvcKind = schema.GroupKind{Kind: "PersistentVolumeClaim"}
)

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
