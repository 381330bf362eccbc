package recreate

import (
	"errors"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Consent, decided from the manifest applied, the revision rolled back
// from and the gate, with the advice given when there is none.
func TestConsent(t *testing.T) {
	svcRefusal := apierrors.NewInvalid(svcKind, "migrate", field.ErrorList{field.Invalid(field.NewPath("spec", "clusterIPs").Index(0), "x", "may not change")})
	rolledBack := Consents{{kind: jobKind, name: "migrate"}: true}
	tests := []struct {
		name         string
		policy       Policy
		kind         schema.GroupKind
		cause        error
		annotation   string
		wantConsent  bool
		wantOptedOut bool
		wantAdvice   string
	}{
		{name: "annotation", kind: jobKind, cause: templateRefusal, annotation: Enabled, wantConsent: true},
		{name: "annotation opts out, gate on", policy: Policy{Gate: true}, kind: jobKind, cause: templateRefusal, annotation: Disabled,
			wantOptedOut: true, wantAdvice: "it opts out of recreation"},
		{name: "annotation opts out, rolled back from an enabled revision", policy: Policy{RolledBackFrom: rolledBack}, kind: jobKind,
			cause: templateRefusal, annotation: Disabled, wantOptedOut: true, wantAdvice: "it opts out"},
		{name: "an unknown value is no consent", kind: jobKind, cause: templateRefusal, annotation: "yes",
			wantAdvice: "annotate it helm.toolkit.fluxcd.io/force: enabled (or turn on the RecreateImmutableResources feature gate)"},
		{name: "rolled back from an enabled revision", policy: Policy{RolledBackFrom: rolledBack, Release: Release{Namespace: "shop"}},
			kind: jobKind, cause: templateRefusal, wantConsent: true},
		{name: "gate, Service clusterIPs", policy: Policy{Gate: true}, kind: svcKind, cause: svcRefusal, wantConsent: true},
		{name: "gate off, covered kind: both named", kind: svcKind, cause: svcRefusal, wantAdvice: "(or turn on the RecreateImmutableResources feature gate)"},
		{name: "gate on, custom resource: only the annotation", policy: Policy{Gate: true}, kind: crKind, cause: sizeRefusal,
			wantAdvice: "annotate it helm.toolkit.fluxcd.io/force: enabled to let the controller recreate it"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var annotations map[string]string
			if tt.annotation != "" {
				annotations = map[string]string{Annotation: tt.annotation}
			}
			by, optedOut, advice := tt.policy.consent(Refused{Kind: tt.kind, Cause: tt.cause, Desired: object(tt.kind, "", annotations)})
			if ok := by != ""; ok != tt.wantConsent || optedOut != tt.wantOptedOut || !strings.Contains(advice, tt.wantAdvice) || tt.wantAdvice == "" && advice != "" {
				t.Errorf("consent = %q, %v, %q; want %v, %v, %q", by, optedOut, advice, tt.wantConsent, tt.wantOptedOut, tt.wantAdvice)
			}
		})
	}
}

func TestNeverRecreated(t *testing.T) {
	for gk, want := range map[schema.GroupKind]string{
		pvcKind:                    "a PersistentVolumeClaim is never recreated",
		{Kind: "PersistentVolume"}: "a PersistentVolume is never recreated",
		{Kind: "Namespace"}:        "a Namespace is never recreated",
		{Group: "apiextensions.k8s.io", Kind: "CustomResourceDefinition"}: "a CustomResourceDefinition is never recreated",
		jobKind: "",
		crKind:  "",
	} {
		if got := neverRecreated(gk); want == "" && got != "" || !strings.Contains(got, want) {
			t.Errorf("neverRecreated(%s) = %q, want %q", gk, got, want)
		}
	}
}

// The fields a refusal names, without indexes or keys; none when it names
// no field or is not the API server's answer.
func TestRefusedFields(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want string
	}{
		{name: "index and key dropped", err: apierrors.NewInvalid(cmKind, "x", field.ErrorList{
			field.Invalid(field.NewPath("spec", "clusterIPs").Index(1), "x", "no"), field.Invalid(field.NewPath("data").Key("a.b"), "x", "no")}),
			want: "spec.clusterIPs,data"},
		{name: "no details", err: apierrors.NewBadRequest("no"), want: ""},
		{name: "not the API server's", err: errors.New("spec.template: field is immutable"), want: ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := strings.Join(refusedFields(tt.err), ","); got != tt.want {
				t.Errorf("refusedFields = %q, want %q", got, tt.want)
			}
		})
	}
}
