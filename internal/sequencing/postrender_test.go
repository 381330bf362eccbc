package sequencing

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

// appendDoc is a post renderer standing for the HelmRelease's own: it changes
// the stream, so the check must look at its output.
type appendDoc string

func (a appendDoc) Run(in *bytes.Buffer) (*bytes.Buffer, error) {
	return bytes.NewBufferString(in.String() + string(a)), nil
}

func TestCheckOrder(t *testing.T) {
	doc := func(file, name string, annotations ...string) string {
		var b strings.Builder
		b.WriteString("---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: " + name + "\n  annotations:\n")
		b.WriteString("    postrenderer.helm.sh/postrender-filename: '" + file + "'\n")
		for i := 0; i+1 < len(annotations); i += 2 {
			b.WriteString("    " + annotations[i] + ": '" + annotations[i+1] + "'\n")
		}
		return b.String()
	}
	good := doc("shop/templates/a.yaml", "a", AnnotationResourceGroup, "a") +
		doc("shop/templates/b.yaml", "b", AnnotationResourceGroup, "b", AnnotationDependsOnGroups, `["a"]`) +
		// A hook may name groups freely: hooks are not sequenced.
		doc("shop/templates/hook.yaml", "hook", "helm.sh/hook", "pre-install", AnnotationResourceGroup, "x", AnnotationDependsOnGroups, `["x"]`)
	cycleInSubchart := doc("shop/charts/db/templates/a.yaml", "a", AnnotationResourceGroup, "a", AnnotationDependsOnGroups, `["b"]`) +
		doc("shop/charts/db/templates/b.yaml", "b", AnnotationResourceGroup, "b", AnnotationDependsOnGroups, `["a"]`)
	// The same names in two charts are two groups each: no cycle.
	sameNamesApart := doc("shop/templates/a.yaml", "a1", AnnotationResourceGroup, "a", AnnotationDependsOnGroups, `["b"]`) +
		doc("shop/charts/db/templates/b.yaml", "b2", AnnotationResourceGroup, "b", AnnotationDependsOnGroups, `["a"]`)

	tests := []struct {
		name    string
		in      string
		next    appendDoc
		wantErr string
	}{
		{name: "a good order passes the stream through", in: good},
		{name: "a cycle in a subchart fails the render", in: cycleInSubchart, wantErr: "resource groups of chart shop/db depend on each other in a cycle: a → b → a"},
		{name: "groups are per chart", in: sameNamesApart},
		{name: "a broken readiness expression fails the render", in: doc("shop/templates/j.yaml", "j",
			AnnotationReadinessSuccess, `["{.succeeded} >> 1"]`, AnnotationReadinessFailure, `["{.failed} >= 1"]`),
			wantErr: "ConfigMap/j: annotation helm.sh/readiness-success"},
		{name: "what the next post renderer adds is checked too", in: good,
			next:    appendDoc(doc("shop/templates/c.yaml", "c", AnnotationResourceGroup, "c", AnnotationDependsOnGroups, `c`)),
			wantErr: "ConfigMap/c: annotation helm.sh/depends-on/resource-groups"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var next appendDoc
			pr := CheckOrder(nil, nil)
			if tt.next != "" {
				next = tt.next
				pr = CheckOrder(next, nil)
			}
			out, err := pr.Run(bytes.NewBufferString(tt.in))
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("Run: %v", err)
				}
				if out.String() != tt.in+string(next) {
					t.Errorf("the stream was changed")
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("error = %v, want it to contain %q", err, tt.wantErr)
			}
			if !errors.Is(err, ErrInvalidOrder) {
				t.Errorf("error %v does not match ErrInvalidOrder: the reconciler would retry it", err)
			}
		})
	}
	var cycle *CycleError
	_, err := CheckOrder(nil, nil).Run(bytes.NewBufferString(cycleInSubchart))
	if !errors.As(err, &cycle) {
		t.Errorf("the render error is not a *CycleError the reconciler can recognise: %v", err)
	}
}
