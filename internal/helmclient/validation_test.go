package helmclient

import (
	"errors"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/cli-runtime/pkg/resource"
)

// serverAnswers is a fake cluster verifier: what it says per kind, and how
// often it was asked.
type serverAnswers struct {
	answers map[schema.GroupVersionKind]error
	asked   int
}

func (s *serverAnswers) HasSupport(gvk schema.GroupVersionKind) error {
	s.asked++
	return s.answers[gvk]
}

func TestVerifierRemembersOnlyServerValidatedKinds(t *testing.T) {
	deploy := schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}
	legacy := schema.GroupVersionKind{Group: "old.example.com", Version: "v1", Kind: "Legacy"}
	fresh := schema.GroupVersionKind{Group: "new.example.com", Version: "v1", Kind: "Fresh"}
	unsupported := resource.NewParamUnsupportedError(legacy, resource.QueryParamFieldValidation)
	notServed := errors.New("the server has no schema for new.example.com/v1")
	cases := []struct {
		name string
		gvk  schema.GroupVersionKind
		// answer is the cluster's, the same every time.
		answer error
		// wantAsked is how often the cluster is asked over three actions.
		wantAsked int
	}{
		{name: "validated by the server: asked once", gvk: deploy, wantAsked: 1},
		{name: "parameter unsupported: asked every time", gvk: legacy, answer: unsupported, wantAsked: 3},
		{name: "not known yet: asked every time", gvk: fresh, answer: notServed, wantAsked: 3},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			known := NewFieldValidation()
			server := &serverAnswers{answers: map[schema.GroupVersionKind]error{tc.gvk: tc.answer}}
			for action := 0; action < 3; action++ {
				v := &verifier{known: known, ask: func() (resource.Verifier, error) { return server, nil }}
				if err := v.HasSupport(tc.gvk); !errors.Is(err, tc.answer) && err != tc.answer {
					t.Fatalf("action %d: %v, want the cluster's answer %v", action, err, tc.answer)
				}
			}
			if server.asked != tc.wantAsked {
				t.Errorf("cluster asked %d times, want %d", server.asked, tc.wantAsked)
			}
		})
	}
}

func TestVerifierReportsAClusterItCannotReach(t *testing.T) {
	down := errors.New("connection refused")
	v := &verifier{known: NewFieldValidation(), ask: func() (resource.Verifier, error) { return nil, down }}
	gvk := schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}
	if err := v.HasSupport(gvk); !errors.Is(err, down) {
		t.Fatalf("HasSupport = %v, want it to wrap %v", err, down)
	}
	if v.known.Len() != 0 {
		t.Error("a kind was remembered without the server's word")
	}
}

func TestClustersShareByHost(t *testing.T) {
	c := NewClusters()
	if c.FieldValidation("https://a:6443") != c.FieldValidation("https://a:6443") {
		t.Error("two connections to one API server do not share")
	}
	if c.FieldValidation("https://a:6443") == c.FieldValidation("https://b:6443") {
		t.Error("two API servers share")
	}
}
