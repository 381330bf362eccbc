package reconcile

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"

	v2 "github.com/afterhooks/helm-controller/api/v2"
	"github.com/afterhooks/helm-controller/internal/helmverb"
)

// Predict names the first Helm call the machine then makes, for each
// state: the prediction and the action share their code, and this holds
// them to each other.
func TestPredictMatchesTheFirstAction(t *testing.T) {
	deployed := func(t *testing.T, h *harness) { h.mustRun(t) }
	cases := []struct {
		name   string
		mutate []func(*v2.HelmRelease)
		setup  func(*testing.T, *harness)
		want   Step
		call   string // the first Helm call of the run; "" for none
	}{
		{name: "nothing in storage", setup: func(*testing.T, *harness) {}, want: StepInstall, call: "install"},
		{name: "in sync", setup: deployed, want: StepNone},
		{name: "values changed", setup: func(t *testing.T, h *harness) {
			deployed(t, h)
			h.values = map[string]any{"replicas": 2}
		}, want: StepUpgrade, call: "upgrade"},
		{name: "chart renamed: the controller reinstalls first, the machine upgrades", setup: func(t *testing.T, h *harness) {
			deployed(t, h)
			h.chart = newFakeChart("other", "1.0.0")
		}, want: StepUpgrade, call: "upgrade"},
		{name: "locked", setup: func(t *testing.T, h *harness) {
			deployed(t, h)
			h.helm.last().Info.Status = "pending-upgrade"
		}, want: StepUnlock, call: "unlock"},
		{name: "untested", setup: func(t *testing.T, h *harness) {
			deployed(t, h)
			h.obj.Spec.Test = &helmv2.Test{Enable: true}
		}, want: StepTest, call: "test"},
		{name: "install retries used up",
			mutate: []func(*v2.HelmRelease){func(o *v2.HelmRelease) {
				o.Spec.Install = &v2.Install{Install: helmv2.Install{Remediation: &helmv2.InstallRemediation{Retries: 0}}}
			}},
			setup: func(t *testing.T, h *harness) {
				h.helm.fail["install"] = errors.New("boom")
				_ = h.run(t)
			}, want: StepNone},
		{name: "upgrade retries used up, then a new generation",
			setup: func(t *testing.T, h *harness) {
				deployed(t, h)
				h.values = map[string]any{"replicas": 2}
				h.helm.fail["upgrade"] = errors.New("boom")
				_ = h.run(t)
				if next := Predict(h.request(), h.helm.last()); next.Step != StepNone {
					t.Fatalf("with the retries used up: step %s (%s), want none", next.Step, next.Why)
				}
				delete(h.helm.fail, "upgrade")
				// A new spec (the same values, as a changed post renderer
				// or timeout would be) starts counting failures afresh.
				h.obj.Generation++
			}, want: StepUpgrade, call: "upgrade"},
		{name: "install retries used up, then a new generation",
			mutate: []func(*v2.HelmRelease){func(o *v2.HelmRelease) {
				o.Spec.Install = &v2.Install{Install: helmv2.Install{Remediation: &helmv2.InstallRemediation{Retries: 0}}}
			}},
			setup: func(t *testing.T, h *harness) {
				h.helm.fail["install"] = errors.New("boom")
				_ = h.run(t)
				h.obj.Generation++
			}, want: StepUpgrade, call: "upgrade"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(tc.mutate...)
			tc.setup(t, h)
			delete(h.helm.fail, "install")
			h.takeCalls()
			next := Predict(h.request(), h.helm.last())
			if next.Step != tc.want {
				t.Fatalf("step %s (%s; %s), want %s", next.Step, next.Reason, next.Why, tc.want)
			}
			_ = h.run(t)
			var first string
			for _, c := range h.takeCalls() {
				if c != "detect" {
					first = c
					break
				}
			}
			if first != tc.call {
				t.Errorf("the machine's first call was %q, the prediction %s wants %q", first, next.Step, tc.call)
			}
		})
	}
}

// decide carries, besides the step, what the machine needs to carry it
// out where one step stands for several executions: the error a StepNone
// ends with, and the failure of a cancelled wait that failed must still
// see whatever remediation (none included) the step names.
func TestDecideCarriesWhatTheStepNeeds(t *testing.T) {
	deployed := func(t *testing.T, h *harness) { h.mustRun(t) }
	retryOnFailure := func(o *v2.HelmRelease) {
		o.Spec.Upgrade = &v2.Upgrade{}
		o.Spec.Upgrade.Strategy = &helmv2.UpgradeStrategy{Name: string(helmv2.ActionStrategyRetryOnFailure)}
	}
	rollbackOnFailure := func(o *v2.HelmRelease) {
		o.Spec.Upgrade = &v2.Upgrade{Upgrade: helmv2.Upgrade{Remediation: &helmv2.UpgradeRemediation{Retries: 1}}}
	}
	canceledUpgrade := func(t *testing.T, h *harness) {
		deployed(t, h)
		h.chart = newFakeChart("podinfo", "6.1.0")
		h.helm.fail["upgrade"] = &HealthCheckCanceledError{Trigger: "HelmChart/flux-system/default-app", Err: context.Canceled}
		_ = h.run(t)
		delete(h.helm.fail, "upgrade")
	}
	cases := []struct {
		name         string
		mutate       []func(*v2.HelmRelease)
		setup        func(*testing.T, *harness)
		state        State // overrides the observed state when set
		want         Step
		wantEnd      string // a part of the error a StepNone ends with; "" for none
		wantCanceled bool
	}{
		{name: "in sync ends without an error", setup: deployed, want: StepNone},
		{name: "a state the machine does not know ends with an error", setup: deployed, state: "Sideways",
			want: StepNone, wantEnd: `unknown release state "Sideways"`},
		{name: "used-up retries end with ErrRetriesExhausted",
			mutate: []func(*v2.HelmRelease){func(o *v2.HelmRelease) {
				o.Spec.Install = &v2.Install{Install: helmv2.Install{Remediation: &helmv2.InstallRemediation{Retries: 0}}}
			}},
			setup: func(t *testing.T, h *harness) {
				h.helm.fail["install"] = errors.New("boom")
				_ = h.run(t)
				delete(h.helm.fail, "install")
			}, want: StepNone, wantEnd: ErrRetriesExhausted.Error()},
		{name: "a cancelled wait is remediated as configured", mutate: []func(*v2.HelmRelease){rollbackOnFailure},
			setup: canceledUpgrade, want: StepRollback, wantCanceled: true},
		{name: "a cancelled wait without a remediation still goes to failed", mutate: []func(*v2.HelmRelease){retryOnFailure},
			setup: canceledUpgrade, want: StepNone, wantCanceled: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(tc.mutate...)
			tc.setup(t, h)
			req := withAttemptTracked(h.request())
			cur := h.helm.last()
			obs := Observe(req, cur)
			if tc.state != "" {
				obs.State = tc.state
			}
			n := decide(req, cur, obs)
			if n.Step != tc.want {
				t.Fatalf("step %s (%s; %s), want %s", n.Step, n.Reason, n.Why, tc.want)
			}
			switch {
			case tc.wantEnd == "" && n.end != nil:
				t.Errorf("ends with %v, want no error", n.end)
			case tc.wantEnd != "" && (n.end == nil || !strings.Contains(n.end.Error(), tc.wantEnd)):
				t.Errorf("ends with %v, want an error saying %q", n.end, tc.wantEnd)
			case n.end != nil && n.Why != n.end.Error():
				t.Errorf("why %q, want the error it ends with, %q", n.Why, n.end)
			}
			if got := n.canceledWait != nil; got != tc.wantCanceled {
				t.Errorf("carries the cancelled wait's failure: %t (%v), want %t", got, n.canceledWait, tc.wantCanceled)
			}
		})
	}
}

// A step's verbs are the Helm actions a preview shows for it: one for the
// steps named after a verb, an uninstall then an install for a reinstall,
// none for the steps that run no Helm action.
func TestStepVerbs(t *testing.T) {
	cases := []struct {
		step Step
		want []helmverb.Verb
	}{
		{StepNone, nil},
		{StepInstall, []helmverb.Verb{helmverb.Install}},
		{StepUpgrade, []helmverb.Verb{helmverb.Upgrade}},
		{StepTest, []helmverb.Verb{helmverb.Test}},
		{StepRollback, []helmverb.Verb{helmverb.Rollback}},
		{StepUninstall, []helmverb.Verb{helmverb.Uninstall}},
		{StepReinstall, []helmverb.Verb{helmverb.Uninstall, helmverb.Install}},
		{StepUnlock, nil},
		{StepResume, nil},
		{StepRecord, nil},
	}
	for _, tc := range cases {
		if got := tc.step.Verbs(); !slices.Equal(got, tc.want) {
			t.Errorf("%s: verbs %v, want %v", tc.step, got, tc.want)
		}
	}
}
