package reconcile

import (
	"context"
	"errors"
	"testing"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	"github.com/fluxcd/pkg/apis/kustomize"
	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	"github.com/fluxcd/pkg/ssa/jsondiff"

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
	h.takeCalls()
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

	// The failing upgrade changed only the post renderers. Upstream finds
	// the rolled-back release in sync and reports Ready True/
	// UpgradeSucceeded; this controller retries as the remediation says,
	// then stalls (docs/differences.md, "a failing upgrade that changes
	// only the post renderers").
	if err := h.run(t); err == nil {
		t.Fatal("the retried upgrade's failure is not reported")
	}
	wantCalls(t, h, "upgrade", "rollback")
	err := h.run(t)
	if !errors.Is(err, ErrRetriesExhausted) {
		t.Fatalf("after the retry: %v, want the retries exhausted", err)
	}
	wantCalls(t, h)
	if ready := conditions.Get(h.obj, meta.ReadyCondition); ready == nil || ready.Status == "True" {
		t.Errorf("Ready %+v, want not True: the release runs without the spec's post renderers", ready)
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
			h := installedHarness(t)
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

// TestResumeRecordsOnlyTheDigestsItWasMadeWith restarts the controller
// during the afterHooks readiness wait of an upgrade; the resumed revision
// was rendered with the post renderers and common metadata of the spec
// that started it. A spec changed meanwhile must still be upgraded to, not
// recorded as observed by the resumed revision.
func TestResumeRecordsOnlyTheDigestsItWasMadeWith(t *testing.T) {
	cases := []struct {
		name string
		// during changes the spec while the controller is down.
		during    func(*v2.HelmRelease)
		wantCalls []string
	}{
		{"unchanged", nil, []string{"resume"}},
		{"post renderers changed", withImageTag("6.3"), []string{"resume", "upgrade"}},
		{"common metadata changed", withCommonLabel("red"), []string{"resume", "upgrade"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(withImageTag("6.1"), withCommonLabel("blue"), func(o *v2.HelmRelease) {
				o.Spec.Install = &v2.Install{WaitStrategy: v2.AfterHooks}
				o.Spec.Upgrade = &v2.Upgrade{WaitStrategy: v2.AfterHooks}
			})
			h.mustRun(t)
			h.obj.Status.ObservedGeneration = h.obj.Generation
			h.takeCalls()

			// An upgrade for new post renderers, interrupted by a shutdown
			// during its readiness wait.
			newGeneration(h, withImageTag("6.2"))
			ctx, cancel := context.WithCancel(context.Background())
			h.helm.interrupt, h.helm.shutdown = "upgrade", cancel
			m := &Machine{Helm: h.helm, Recorder: h.recorder}
			_ = m.Run(ctx, h.request())
			cancel()
			wantCalls(t, h, "upgrade")
			h.helm.interrupt = ""

			if tc.during != nil {
				newGeneration(h, tc.during)
			}
			h.mustRun(t)
			wantCalls(t, h, tc.wantCalls...)
			wantDigests(t, h)
			if obs := Observe(h.request(), h.helm.last()); obs.State != StateInSync {
				t.Errorf("observed %s (%s) after the reconcile, want %s", obs.State, obs.Reason, StateInSync)
			}
		})
	}
}

// TestAdoptionWithDrift adopts a release made without recorded digests
// whose objects drifted. The release matches its post renderers whatever
// drift detection finds; the digests must be recorded in that reconcile,
// or the next one, with Ready turned False by the drift, no longer adopts
// and upgrades instead.
func TestAdoptionWithDrift(t *testing.T) {
	cases := []struct {
		name      string
		mode      helmv2.DriftDetectionMode
		drift     []jsondiff.DiffSet
		detectErr error
	}{
		{name: "warn mode reports drift", mode: helmv2.DriftDetectionWarn, drift: []jsondiff.DiffSet{replicasChanged}},
		{name: "drift survives its correction", mode: helmv2.DriftDetectionEnabled, drift: []jsondiff.DiffSet{replicasChanged}},
		{name: "detection fails", mode: helmv2.DriftDetectionEnabled, detectErr: errors.New("the API server is gone")},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := installedHarness(t)
			withImageTag("6.1")(h.obj)
			withDriftMode(tc.mode)(h.obj)
			h.obj.Status.ObservedPostRenderersDigest, h.obj.Status.ObservedCommonMetadataDigest = "", ""
			h.obj.Status.ObservedGeneration = h.obj.Generation
			h.helm.drift, h.helm.detectErr = tc.drift, tc.detectErr

			_ = h.run(t)
			wantDigests(t, h)
			_ = h.run(t)
			for _, c := range h.takeCalls() {
				if c == "upgrade" {
					t.Fatalf("an adopted release was upgraded after drift made it not Ready")
				}
			}
		})
	}
}
