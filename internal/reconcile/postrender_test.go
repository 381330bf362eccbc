package reconcile

import (
	"errors"
	"testing"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	"github.com/fluxcd/pkg/apis/kustomize"
	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"

	v2 "github.com/afterhooks/helm-controller/api/v2"
	"github.com/afterhooks/helm-controller/internal/postrender"
)

func withImageTag(tag string) func(*v2.HelmRelease) {
	return func(o *v2.HelmRelease) {
		o.Spec.PostRenderers = []helmv2.PostRenderer{{Kustomize: &helmv2.Kustomize{
			Images: []kustomize.Image{{Name: "podinfo", NewTag: tag}},
		}}}
	}
}

func withCommonLabel(value string) func(*v2.HelmRelease) {
	return func(o *v2.HelmRelease) {
		o.Spec.CommonMetadata = &helmv2.CommonMetadata{Labels: map[string]string{"team": value}}
	}
}

// newGeneration applies a spec change as the API server would.
func newGeneration(h *harness, change func(*v2.HelmRelease)) {
	change(h.obj)
	h.obj.Generation++
}

func wantDigests(t *testing.T, h *harness) {
	t.Helper()
	st := h.obj.Status
	if want := postrender.PostRenderersDigest(h.obj.Spec.PostRenderers); st.ObservedPostRenderersDigest != want {
		t.Errorf("observedPostRenderersDigest = %q, want %q", st.ObservedPostRenderersDigest, want)
	}
	if want := postrender.CommonMetadataDigest(h.obj.Spec.CommonMetadata); st.ObservedCommonMetadataDigest != want {
		t.Errorf("observedCommonMetadataDigest = %q, want %q", st.ObservedCommonMetadataDigest, want)
	}
}

func TestPostRenderChangesUpgrade(t *testing.T) {
	cases := []struct {
		name       string
		initial    []func(*v2.HelmRelease)
		change     func(*v2.HelmRelease)
		wantReason string
	}{
		{"post renderer added", nil, withImageTag("6.1"), "post renderers changed"},
		{"post renderer changed", []func(*v2.HelmRelease){withImageTag("6.1")}, withImageTag("6.2"), "post renderers changed"},
		{"post renderers removed", []func(*v2.HelmRelease){withImageTag("6.1")},
			func(o *v2.HelmRelease) { o.Spec.PostRenderers = nil }, "post renderers changed"},
		{"common metadata added", nil, withCommonLabel("blue"), "common metadata changed"},
		{"common metadata changed", []func(*v2.HelmRelease){withCommonLabel("blue")}, withCommonLabel("red"), "common metadata changed"},
		{"common metadata removed", []func(*v2.HelmRelease){withCommonLabel("blue")},
			func(o *v2.HelmRelease) { o.Spec.CommonMetadata = nil }, "common metadata changed"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(tc.initial...)
			h.mustRun(t)
			wantCalls(t, h, "install")
			wantDigests(t, h)
			h.obj.Status.ObservedGeneration = h.obj.Generation

			newGeneration(h, tc.change)
			if obs := Observe(h.request(), h.helm.last()); obs.State != StateOutOfSync || obs.Reason != tc.wantReason {
				t.Fatalf("observed %s (%s), want %s (%s)", obs.State, obs.Reason, StateOutOfSync, tc.wantReason)
			}
			h.mustRun(t)
			wantCalls(t, h, "upgrade")
			wantDigests(t, h)

			h.obj.Status.ObservedGeneration = h.obj.Generation
			h.mustRun(t)
			wantCalls(t, h)
		})
	}
}

// A failed upgrade leaves the digests of the release that is deployed, so
// the next attempt still sees the change.
func TestFailedUpgradeKeepsObservedDigest(t *testing.T) {
	h := newHarness(withImageTag("6.1"), func(o *v2.HelmRelease) {
		o.Spec.Upgrade = &v2.Upgrade{}
		o.Spec.Upgrade.Remediation = &helmv2.UpgradeRemediation{Retries: 1}
	})
	h.mustRun(t)
	h.calls()
	before := h.obj.Status.ObservedPostRenderersDigest

	newGeneration(h, withImageTag("6.2"))
	h.helm.fail["upgrade"] = errors.New("deployment not ready")
	if err := h.run(t); err == nil {
		t.Fatal("upgrade failure not reported")
	}
	wantCalls(t, h, "upgrade", "rollback")
	if got := h.obj.Status.ObservedPostRenderersDigest; got != before {
		t.Fatalf("digest after a failed upgrade = %q, want the deployed one %q", got, before)
	}
	if obs := Observe(h.request(), h.helm.last()); obs.State != StateOutOfSync {
		t.Fatalf("after rollback: %s (%s), want OutOfSync", obs.State, obs.Reason)
	}
}

func TestEmptyObservedDigest(t *testing.T) {
	cases := []struct {
		name        string
		reconciled  bool // the current generation reconciled before
		ready       bool
		wantUpgrade bool
	}{
		// Made by a controller that did not record the digest: adopted.
		{name: "generation reconciled and ready", reconciled: true, ready: true},
		{name: "new generation", reconciled: false, ready: true, wantUpgrade: true},
		// E.g. a controller that refused post renderers stopped it.
		{name: "generation reconciled but not ready", reconciled: true, ready: false, wantUpgrade: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness()
			h.mustRun(t)
			h.calls()
			withImageTag("6.1")(h.obj)
			withCommonLabel("blue")(h.obj)
			h.obj.Status.ObservedPostRenderersDigest, h.obj.Status.ObservedCommonMetadataDigest = "", ""
			if tc.reconciled {
				h.obj.Status.ObservedGeneration = h.obj.Generation
			}
			if !tc.ready {
				conditions.MarkFalse(h.obj, meta.ReadyCondition, "InitFailed", "refused")
			}

			// The controller marks every reconcile Reconciling before the
			// machine runs; adoption must not mistake that for not Ready.
			conditions.MarkReconciling(h.obj, meta.ProgressingReason, "reconciliation in progress")

			h.mustRun(t)
			if tc.wantUpgrade {
				wantCalls(t, h, "upgrade")
			} else {
				wantCalls(t, h)
				if !conditions.IsTrue(h.obj, meta.ReadyCondition) {
					t.Errorf("not ready after adoption: %+v", h.obj.Status.Conditions)
				}
			}
			wantDigests(t, h)
		})
	}
}
