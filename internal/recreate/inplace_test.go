package recreate

import (
	"context"
	"errors"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// A replace (Helm's force with client-side apply) refused for an object
// with consent is tried again as a patch: only a patch refused too
// recreates it.
func TestRecreateTriesInPlaceAfterAReplace(t *testing.T) {
	putRefusal := apierrors.NewInvalid(jobKind, "migrate", field.ErrorList{
		field.Required(field.NewPath("spec", "selector"), ""),
		field.Invalid(field.NewPath("spec", "template", "metadata", "labels"), "x", "`selector` does not match template `labels`")})
	// A refusal that names no field (an admission policy's) is not the
	// gate's to lift.
	unnamedRefusal := apierrors.NewInvalid(jobKind, "migrate", field.ErrorList{field.Invalid(nil, "x", "field is immutable")})
	tests := []struct {
		name       string
		policy     Policy
		desired    map[string]string
		patchErr   error
		wantPatch  bool
		wantErr    string
		wantFields string // of the error, or of what was recreated
		wantInPl   bool
		wantDelete bool
	}{
		{name: "unchanged: patched, nothing deleted", desired: enabled, wantPatch: true, wantInPl: true},
		{name: "unchanged under the gate", policy: Policy{Gate: true}, wantPatch: true, wantInPl: true},
		{name: "no consent: no patch, upstream's failure", wantErr: "spec.selector: Required value"},
		{name: "opted out: no patch", desired: map[string]string{Annotation: Disabled}, wantErr: "it opts out"},
		{name: "the patch is refused too: recreated for the patch's refusal", desired: enabled, patchErr: templateRefusal,
			wantPatch: true, wantDelete: true, wantFields: "spec.template: Invalid value"},
		{name: "the patch fails otherwise: nothing deleted", desired: enabled, patchErr: errors.New("connection refused"),
			wantPatch: true, wantErr: "not recreated: updating it in place after its replace was refused failed: connection refused"},
		{name: "the patch's refusal is not the gate's: advice", policy: Policy{Gate: true}, patchErr: unnamedRefusal,
			wantPatch: true, wantErr: "field is immutable; annotate it helm.toolkit.fluxcd.io/force: enabled to let"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cluster := &fakeObject{live: object(jobKind, "a", nil), dryRunErr: alreadyThere}
			patched := false
			r := Refused{Object: "Job/shop/migrate", Kind: jobKind, Desired: object(jobKind, "", tt.desired), Cause: putRefusal,
				Cluster: cluster, Dependents: &fakeDependents{},
				InPlace: func(context.Context) error { patched = true; return tt.patchErr }}
			done, err := tt.policy.Recreate(context.Background(), r, func(context.Context) error { return nil })
			if patched != tt.wantPatch || (len(cluster.deleted) > 0) != tt.wantDelete {
				t.Errorf("patched %v, deleted %v; want %v, %v", patched, cluster.deleted, tt.wantPatch, tt.wantDelete)
			}
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Recreate = %v, want an error containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || done.InPlace != tt.wantInPl || !strings.Contains(done.Fields, tt.wantFields) {
				t.Fatalf("Recreate = %+v, %v; want in place %v, fields %q", done, err, tt.wantInPl, tt.wantFields)
			}
		})
	}
}

func TestReplaced(t *testing.T) {
	if !replaced(errors.New(`failed to replace object: Job.batch "migrate" is invalid`)) {
		t.Error("Helm's replace error not recognised")
	}
	if replaced(templateRefusal) {
		t.Error("a patch's refusal taken for a replace's")
	}
}
