package reconcile

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/chartutil"
	"github.com/fluxcd/pkg/runtime/conditions"
	"github.com/opencontainers/go-digest"
	"helm.sh/helm/v4/pkg/release/common"
	releasev1 "helm.sh/helm/v4/pkg/release/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v2 "github.com/afterhooks/helm-controller/api/v2"
	"github.com/afterhooks/helm-controller/internal/hookcleanup"
	"github.com/afterhooks/helm-controller/internal/sequencing"
)

func sprintf(format string, args ...any) string { return fmt.Sprintf(format, args...) }

type harness struct {
	helm     *fakeHelm
	recorder *fakeRecorder
	obj      *v2.HelmRelease
	chart    *fakeChart
	values   map[string]any
}

func newHarness(mutate ...func(*v2.HelmRelease)) *harness {
	obj := &v2.HelmRelease{ObjectMeta: metav1.ObjectMeta{Name: "app", Namespace: "default", Generation: 1}}
	obj.Spec.Interval = metav1.Duration{Duration: time.Minute}
	for _, m := range mutate {
		m(obj)
	}
	return &harness{helm: newFakeHelm(), recorder: &fakeRecorder{}, obj: obj,
		chart: newFakeChart("podinfo", "6.0.0"), values: map[string]any{"replicas": 1}}
}

// installedHarness is a harness whose release a first reconcile
// installed, its Helm calls forgotten.
func installedHarness(t *testing.T) *harness {
	t.Helper()
	h := newHarness()
	h.mustRun(t)
	h.takeCalls()
	return h
}

func (h *harness) request() *Request {
	return &Request{Object: h.obj, Chart: h.chart, Values: h.values, ConfigDigest: h.configDigest()}
}

// configDigest is the digest of the values, computed as the controller does.
func (h *harness) configDigest() string {
	return chartutil.DigestValues(digest.Canonical, h.values).String()
}

func (h *harness) run(t *testing.T) error {
	t.Helper()
	h.helm.written = nil
	m := &Machine{Helm: h.helm, Recorder: h.recorder}
	return m.Run(context.Background(), h.request())
}

func (h *harness) mustRun(t *testing.T) {
	t.Helper()
	if err := h.run(t); err != nil {
		t.Fatalf("reconcile failed: %v", err)
	}
}

// takeCalls returns the Helm calls made since the last take, and forgets
// them.
func (h *harness) takeCalls() []string {
	c := h.helm.calls
	h.helm.calls = nil
	return c
}

func wantCondition(t *testing.T, h *harness, condType string, status metav1.ConditionStatus, reason string) {
	t.Helper()
	c := conditions.Get(h.obj, condType)
	if c == nil {
		t.Fatalf("condition %s missing; have %+v", condType, h.obj.Status.Conditions)
	}
	if c.Status != status || c.Reason != reason {
		t.Fatalf("condition %s = %s/%s (%s), want %s/%s", condType, c.Status, c.Reason, c.Message, status, reason)
	}
}

func wantCalls(t *testing.T, h *harness, want ...string) {
	t.Helper()
	if got := h.takeCalls(); !reflect.DeepEqual(got, want) && !(len(got) == 0 && len(want) == 0) {
		t.Fatalf("Helm calls %v, want %v", got, want)
	}
}

func TestInstallThenInSync(t *testing.T) {
	h := newHarness()
	h.mustRun(t)
	wantCalls(t, h, "install")
	wantCondition(t, h, helmv2.ReleasedCondition, metav1.ConditionTrue, helmv2.InstallSucceededReason)
	wantCondition(t, h, meta.ReadyCondition, metav1.ConditionTrue, helmv2.InstallSucceededReason)
	hist := h.obj.Status.History
	if len(hist) != 1 || hist[0].Version != 1 || hist[0].Status != "deployed" || hist[0].ChartVersion != "6.0.0" ||
		hist[0].ConfigDigest != h.configDigest() || hist[0].Action != helmv2.ReleaseActionInstall || hist[0].Digest == "" {
		t.Fatalf("history after install: %+v", hist[0])
	}
	if h.obj.Status.LastAttemptedRevision != "6.0.0" || h.obj.Status.LastAttemptedConfigDigest != h.configDigest() {
		t.Errorf("lastAttempted* = %q/%q", h.obj.Status.LastAttemptedRevision, h.obj.Status.LastAttemptedConfigDigest)
	}
	if h.obj.Status.LastAttemptedReleaseActionDuration == nil {
		t.Error("lastAttemptedReleaseActionDuration not recorded")
	}
	if len(h.recorder.events) != 1 || h.recorder.events[0].Reason != helmv2.InstallSucceededReason {
		t.Errorf("events %+v", h.recorder.events)
	}

	loads := h.chart.loads
	h.mustRun(t)
	wantCalls(t, h)
	if h.chart.loads != loads {
		t.Error("an in-sync reconcile loaded the chart")
	}
	if len(h.obj.Status.History) != 1 {
		t.Errorf("an in-sync reconcile changed the history: %d entries", len(h.obj.Status.History))
	}
}

func TestUpgradeOnChange(t *testing.T) {
	cases := []struct {
		name   string
		change func(h *harness)
	}{
		{"values", func(h *harness) { h.values = map[string]any{"replicas": 2} }},
		{"chart version", func(h *harness) { h.chart = newFakeChart("podinfo", "6.1.0") }},
		{"chart name, in place", func(h *harness) {
			h.obj.Spec.Upgrade = &v2.Upgrade{}
			h.obj.Spec.Upgrade.ChartNameChangeStrategy = helmv2.ChartNameChangeStrategyInPlaceUpdate
			h.chart = newFakeChart("podinfo-ng", "6.0.0")
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := installedHarness(t)
			tc.change(h)
			h.mustRun(t)
			wantCalls(t, h, "upgrade")
			wantCondition(t, h, meta.ReadyCondition, metav1.ConditionTrue, helmv2.UpgradeSucceededReason)
			hist := h.obj.Status.History
			if len(hist) != 2 || hist[0].Version != 2 || hist[0].Status != "deployed" || hist[1].Status != "superseded" {
				t.Fatalf("history: %+v %+v", hist[0], hist[1])
			}
		})
	}
}

// TestChartRenameUpgradesInPlace: the machine upgrades one chart into
// another. Under chartNameChangeStrategy Reinstall (the default) the
// controller uninstalls the release before the machine runs (TargetChanged),
// so only InPlaceUpdate gets here with a renamed chart.
func TestChartRenameUpgradesInPlace(t *testing.T) {
	h := installedHarness(t)
	h.obj.Spec.Upgrade = &v2.Upgrade{Upgrade: helmv2.Upgrade{ChartNameChangeStrategy: helmv2.ChartNameChangeStrategyInPlaceUpdate}}
	h.chart = newFakeChart("podinfo-ng", "1.0.0")
	h.mustRun(t)
	wantCalls(t, h, "upgrade")
	wantCondition(t, h, meta.ReadyCondition, metav1.ConditionTrue, helmv2.UpgradeSucceededReason)
	if got := h.helm.last().Chart.Metadata.Name; got != "podinfo-ng" {
		t.Fatalf("storage holds chart %s", got)
	}
}

func TestInstallFailureRemediatedByUninstallUntilRetriesExhausted(t *testing.T) {
	h := newHarness(func(o *v2.HelmRelease) {
		o.Spec.Install = &v2.Install{}
		o.Spec.Install.Remediation = &helmv2.InstallRemediation{Retries: 1}
	})
	h.helm.fail["install"] = errors.New("timed out waiting for the condition")

	err := h.run(t)
	if err == nil || errors.Is(err, ErrRetriesExhausted) {
		t.Fatalf("first failure: %v", err)
	}
	wantCalls(t, h, "install", "uninstall")
	wantCondition(t, h, helmv2.ReleasedCondition, metav1.ConditionFalse, helmv2.InstallFailedReason)
	wantCondition(t, h, helmv2.RemediatedCondition, metav1.ConditionTrue, helmv2.UninstallSucceededReason)
	if h.obj.Status.InstallFailures != 1 || h.obj.Status.Failures != 1 {
		t.Fatalf("failure counters %d/%d", h.obj.Status.InstallFailures, h.obj.Status.Failures)
	}

	// The retry fails too: retries (1) are now exhausted and the failed
	// release stays, as remediateLastFailure is off for installs.
	err = h.run(t)
	if !errors.Is(err, ErrRetriesExhausted) {
		t.Fatalf("second failure: %v, want retries exhausted", err)
	}
	wantCalls(t, h, "install")

	// Nothing more happens until something changes.
	if err := h.run(t); !errors.Is(err, ErrRetriesExhausted) {
		t.Fatalf("third run: %v", err)
	}
	wantCalls(t, h)

	// New values reset the counters and try again: as upstream, with an
	// upgrade over the failed install.
	delete(h.helm.fail, "install")
	h.values = map[string]any{"fixed": true}
	h.mustRun(t)
	if h.obj.Status.InstallFailures != 0 {
		t.Errorf("counters not reset: %d", h.obj.Status.InstallFailures)
	}
	wantCalls(t, h, "upgrade")
	wantCondition(t, h, meta.ReadyCondition, metav1.ConditionTrue, helmv2.UpgradeSucceededReason)
}

func TestUpgradeFailureRollsBack(t *testing.T) {
	h := newHarness(func(o *v2.HelmRelease) {
		o.Spec.Upgrade = &v2.Upgrade{}
		o.Spec.Upgrade.Remediation = &helmv2.UpgradeRemediation{Retries: 1}
	})
	h.mustRun(t)
	h.takeCalls()
	h.chart = newFakeChart("podinfo", "6.1.0")
	h.helm.fail["upgrade"] = errors.New("deployment not ready")

	if err := h.run(t); err == nil {
		t.Fatal("upgrade failure not reported")
	}
	wantCalls(t, h, "upgrade", "rollback")
	wantCondition(t, h, helmv2.RemediatedCondition, metav1.ConditionTrue, helmv2.RollbackSucceededReason)
	latest := h.obj.Status.History.Latest()
	if latest.Version != 3 || latest.ChartVersion != "6.0.0" || latest.Action != helmv2.ReleaseActionRollback || latest.Status != "deployed" {
		t.Fatalf("latest after rollback: %+v", latest)
	}
	if got := h.helm.last().Chart.Metadata.Version; got != "6.0.0" {
		t.Fatalf("storage holds chart %s after rollback", got)
	}

	// Second failure exhausts the retries; the rollback stays in place.
	if err := h.run(t); !errors.Is(err, ErrRetriesExhausted) {
		t.Fatalf("second failure: %v", err)
	}
	wantCalls(t, h, "upgrade", "rollback")
	if err := h.run(t); !errors.Is(err, ErrRetriesExhausted) {
		t.Fatalf("third run: %v", err)
	}
	wantCalls(t, h)
}

func TestUpgradeFailureUninstallStrategy(t *testing.T) {
	h := newHarness(func(o *v2.HelmRelease) {
		o.Spec.Upgrade = &v2.Upgrade{}
		s := helmv2.UninstallRemediationStrategy
		o.Spec.Upgrade.Remediation = &helmv2.UpgradeRemediation{Retries: 2, Strategy: &s}
	})
	h.mustRun(t)
	h.takeCalls()
	h.values = map[string]any{"replicas": 2}
	h.helm.fail["upgrade"] = errors.New("boom")
	if err := h.run(t); err == nil {
		t.Fatal("no error")
	}
	wantCalls(t, h, "upgrade", "uninstall")
	wantCondition(t, h, helmv2.RemediatedCondition, metav1.ConditionTrue, helmv2.UninstallSucceededReason)
	// As upstream: Ready keeps the failure that caused the uninstall;
	// Remediated says what was done about it.
	wantCondition(t, h, meta.ReadyCondition, metav1.ConditionFalse, helmv2.UpgradeFailedReason)
}

func TestRetryOnFailureSkipsRemediation(t *testing.T) {
	h := newHarness(func(o *v2.HelmRelease) {
		o.Spec.Install = &v2.Install{}
		o.Spec.Install.Strategy = &helmv2.InstallStrategy{Name: string(helmv2.ActionStrategyRetryOnFailure),
			RetryInterval: &metav1.Duration{Duration: 42 * time.Second}}
		o.Spec.Upgrade = &v2.Upgrade{}
		o.Spec.Upgrade.Strategy = &helmv2.UpgradeStrategy{Name: string(helmv2.ActionStrategyRetryOnFailure),
			RetryInterval: &metav1.Duration{Duration: 42 * time.Second}}
	})
	h.helm.fail["install"] = errors.New("boom")
	h.helm.fail["upgrade"] = errors.New("boom")
	// As upstream: the failed install is retried with upgrades over it,
	// whose own strategy counts from then on.
	for i, action := range []string{"install", "upgrade", "upgrade"} {
		err := h.run(t)
		var retry *RetryAfterError
		if !errors.As(err, &retry) || retry.After != 42*time.Second {
			t.Fatalf("run %d: %v, want a retry after 42s", i, err)
		}
		wantCalls(t, h, action)
	}
	if st := h.obj.Status; st.Failures == 0 || st.UpgradeFailures == 0 {
		t.Fatalf("failures %d, upgrade failures %d after failed attempts, want them counted", st.Failures, st.UpgradeFailures)
	}
	// As upstream: the retry that succeeds clears the counters.
	delete(h.helm.fail, "upgrade")
	h.mustRun(t)
	wantCalls(t, h, "upgrade")
	if st := h.obj.Status; st.Failures != 0 || st.InstallFailures != 0 || st.UpgradeFailures != 0 {
		t.Errorf("counters %d/%d/%d after a successful retry, want 0", st.Failures, st.InstallFailures, st.UpgradeFailures)
	}
}

func TestTests(t *testing.T) {
	withTests := func(ignore bool) func(*v2.HelmRelease) {
		return func(o *v2.HelmRelease) {
			o.Spec.Test = &helmv2.Test{Enable: true, IgnoreFailures: ignore}
			o.Spec.Install = &v2.Install{}
			o.Spec.Install.Remediation = &helmv2.InstallRemediation{Retries: 3}
		}
	}
	t.Run("pass", func(t *testing.T) {
		h := newHarness(withTests(false))
		h.mustRun(t)
		wantCalls(t, h, "install", "test")
		wantCondition(t, h, meta.ReadyCondition, metav1.ConditionTrue, helmv2.TestSucceededReason)
		if hooks := h.obj.Status.History.Latest().GetTestHooks(); hooks["smoke"] == nil || hooks["smoke"].Phase != "Succeeded" {
			t.Fatalf("test hooks %+v", hooks)
		}
		h.mustRun(t)
		wantCalls(t, h)
	})
	t.Run("fail remediates", func(t *testing.T) {
		h := newHarness(withTests(false))
		h.helm.testFails = true
		if err := h.run(t); err == nil {
			t.Fatal("test failure not reported")
		}
		wantCalls(t, h, "install", "test", "uninstall")
		wantCondition(t, h, helmv2.TestSuccessCondition, metav1.ConditionFalse, helmv2.TestFailedReason)
		if h.obj.Status.InstallFailures != 1 {
			t.Errorf("install failures %d", h.obj.Status.InstallFailures)
		}
	})
	t.Run("fail ignored", func(t *testing.T) {
		h := newHarness(withTests(true))
		h.helm.testFails = true
		h.mustRun(t)
		wantCalls(t, h, "install", "test")
		wantCondition(t, h, helmv2.TestSuccessCondition, metav1.ConditionFalse, helmv2.TestFailedReason)
		// As upstream: ignored tests do not speak for Ready, the release does.
		wantCondition(t, h, meta.ReadyCondition, metav1.ConditionTrue, helmv2.InstallSucceededReason)
		h.mustRun(t)
		wantCalls(t, h)
	})
	t.Run("ignored by the test spec, counted by the remediation", func(t *testing.T) {
		// As upstream: the remediation's explicit ignoreTestFailures
		// wins over spec.test.ignoreFailures.
		h := newHarness(withTests(true), func(o *v2.HelmRelease) {
			o.Spec.Install.Remediation.IgnoreTestFailures = ptrTo(false)
		})
		h.helm.testFails = true
		if err := h.run(t); err == nil {
			t.Fatal("a test failure the remediation counts was not reported")
		}
		wantCalls(t, h, "install", "test", "uninstall")
		if h.obj.Status.InstallFailures != 1 {
			t.Errorf("install failures %d, want 1", h.obj.Status.InstallFailures)
		}
	})
	t.Run("pass ignored", func(t *testing.T) {
		h := newHarness(withTests(true))
		h.mustRun(t)
		wantCalls(t, h, "install", "test")
		wantCondition(t, h, helmv2.TestSuccessCondition, metav1.ConditionTrue, helmv2.TestSucceededReason)
		wantCondition(t, h, meta.ReadyCondition, metav1.ConditionTrue, helmv2.InstallSucceededReason)
	})
}

func TestObserve(t *testing.T) {
	deployed := func(h *harness) { h.mustRun(t); h.takeCalls() }
	cases := []struct {
		name  string
		setup func(h *harness)
		want  State
	}{
		{"nothing in storage", func(*harness) {}, StateAbsent},
		{"in sync", deployed, StateInSync},
		{"values changed", func(h *harness) { deployed(h); h.values = map[string]any{"other": true} }, StateOutOfSync},
		{"locked", func(h *harness) { deployed(h); h.helm.last().Info.Status = "pending-upgrade" }, StateLocked},
		{"failed", func(h *harness) { deployed(h); h.helm.last().Info.Status = "failed" }, StateFailed},
		{"uninstalled with history kept", func(h *harness) { deployed(h); h.helm.last().Info.Status = "uninstalled" }, StateAbsent},
		{"uninstalled, hook cleanup not done", func(h *harness) { deployed(h); cleanupPending(h.helm.last()) }, StateUninstalling},
		{"not in history", func(h *harness) { deployed(h); h.obj.Status.History = nil }, StateUnmanaged},
		{"newer release made elsewhere", func(h *harness) {
			deployed(h)
			h.helm.newRelease(nil, nil, "deployed")
		}, StateUnmanaged},
		{"untested", func(h *harness) { deployed(h); h.obj.Spec.Test = &helmv2.Test{Enable: true} }, StateUntested},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness()
			tc.setup(h)
			if got := Observe(h.request(), h.helm.last()); got.State != tc.want {
				t.Fatalf("state %s (%s), want %s", got.State, got.Reason, tc.want)
			}
		})
	}
}

func TestLockedReleaseIsUnlockedAndRemediated(t *testing.T) {
	h := newHarness(func(o *v2.HelmRelease) {
		o.Spec.Upgrade = &v2.Upgrade{}
		o.Spec.Upgrade.Remediation = &helmv2.UpgradeRemediation{Retries: 3}
	})
	h.mustRun(t)
	h.values = map[string]any{"replicas": 2}
	h.helm.fail["upgrade"] = errors.New("interrupted")
	_ = h.run(t) // leaves a failed upgrade, rolled back
	h.takeCalls()
	delete(h.helm.fail, "upgrade")
	// Simulate a crash mid-upgrade: the newest release is left pending.
	h.helm.newRelease(h.helm.last().Chart, nil, "pending-upgrade")
	h.obj.Status.History = append(helmv2.Snapshots{newSnapshot(h.request(), h.helm.last(), helmv2.ReleaseActionUpgrade)}, h.obj.Status.History...)

	err := h.run(t)
	calls := h.takeCalls()
	if len(calls) == 0 || calls[0] != "unlock" {
		t.Fatalf("calls %v, want an unlock first (err %v)", calls, err)
	}
	if st := h.helm.last().Info.Status; st.IsPending() {
		t.Fatalf("release still %s", st)
	}
}

func TestUninstallOnDeletion(t *testing.T) {
	h := installedHarness(t)
	m := &Machine{Helm: h.helm, Recorder: h.recorder}
	req := h.request()
	if err := m.Uninstall(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	wantCalls(t, h, "uninstall")
	if s := h.obj.Status.History.Latest(); s.Status != "uninstalled" || s.Deleted.IsZero() {
		t.Fatalf("snapshot after uninstall %+v", s)
	}
	// Nothing left: a second call is a no-op.
	if err := m.Uninstall(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	wantCalls(t, h)
	last := h.recorder.events[len(h.recorder.events)-1]
	// Upstream's wording: the release and its chart.
	if last.Reason != helmv2.UninstallSucceededReason || !strings.HasPrefix(last.Message, "Helm uninstall succeeded for release default/app.v1 with chart ") {
		t.Errorf("event %+v", last)
	}
}

// A HelmRelease whose history records no release of its own (it adopted a
// release `helm install` made, and its first upgrade stored nothing)
// leaves that release alone when it is deleted, as upstream does.
func TestUninstallOnDeletionLeavesAReleaseItNeverRecorded(t *testing.T) {
	h := installedHarness(t)
	h.obj.Status.History = nil
	m := &Machine{Helm: h.helm, Recorder: h.recorder}
	if err := m.Uninstall(context.Background(), h.request()); err != nil {
		t.Fatal(err)
	}
	wantCalls(t, h)
	if st := h.helm.last().Info.Status; st != common.StatusDeployed {
		t.Errorf("release %s, want it left deployed", st)
	}
}

// A failed uninstall of a HelmRelease being deleted makes Ready False
// UninstallFailed, as upstream: the deletion is stuck, whatever the last
// upgrade did.
func TestFailedUninstallOnDeletionIsNotReady(t *testing.T) {
	h := installedHarness(t)
	conditions.MarkTrue(h.obj, meta.ReadyCondition, helmv2.InstallSucceededReason, "installed")
	h.helm.fail["uninstall"] = errors.New("pre-delete hook failed")
	m := &Machine{Helm: h.helm, Recorder: h.recorder}
	if err := m.Uninstall(context.Background(), h.request()); err == nil {
		t.Fatal("a failed uninstall returned no error")
	}
	ready := conditions.Get(h.obj, meta.ReadyCondition)
	if ready == nil || ready.Status != metav1.ConditionFalse || ready.Reason != helmv2.UninstallFailedReason ||
		!strings.Contains(ready.Message, "pre-delete hook failed") {
		t.Errorf("Ready %+v, want False/UninstallFailed naming the cause", ready)
	}
}

// cleanupPending leaves rel as Helm's part of an uninstall with
// deleteHookResources leaves it before the hook cleanup is over.
func cleanupPending(rel *releasev1.Release) {
	rel.Info.Status = common.StatusUninstalled
	rel.Info.Description = hookcleanup.PendingDescription
}

// A controller stopped after Helm uninstalled the release of a deleted
// HelmRelease but before the objects its hooks left were deleted: the
// records are still there, marked. The next controller uninstalls again
// (the action then only finishes the cleanup) instead of taking the
// release for uninstalled and dropping the cleanup. An uninstalled
// release without the mark (keepHistory) is left alone, as before.
func TestUninstallOnDeletionFinishesAnInterruptedHookCleanup(t *testing.T) {
	for _, tc := range []struct {
		name        string
		description string
		want        []string
	}{
		{name: "cleanup pending", description: hookcleanup.PendingDescription, want: []string{"uninstall"}},
		{name: "uninstalled, history kept", description: hookcleanup.CompletedDescription},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := installedHarness(t)
			h.helm.last().Info.Status = common.StatusUninstalled
			h.helm.last().Info.Description = tc.description
			m := &Machine{Helm: h.helm, Recorder: h.recorder}
			if err := m.Uninstall(context.Background(), h.request()); err != nil {
				t.Fatal(err)
			}
			wantCalls(t, h, tc.want...)
		})
	}
}

// The same stop during an uninstall remediation: the next reconcile
// finishes the uninstall as it finishes one Helm left "uninstalling",
// instead of installing over the marked records.
func TestInterruptedHookCleanupOfARemediationIsFinished(t *testing.T) {
	h := newHarness(func(o *v2.HelmRelease) {
		o.Spec.Install = &v2.Install{Install: helmv2.Install{
			Remediation: &helmv2.InstallRemediation{Retries: 0, RemediateLastFailure: ptrTo(true)},
		}}
	})
	h.helm.fail["install"] = errors.New("readiness wait failed")
	ctx, cancel := context.WithCancel(context.Background())
	h.helm.onUninstall = func() {
		cleanupPending(h.helm.last())
		cancel()
	}
	h.helm.fail["uninstall"] = context.Canceled
	m := &Machine{Helm: h.helm, Recorder: h.recorder}
	_ = m.Run(ctx, h.request())
	h.takeCalls()

	h.helm.onUninstall, h.helm.fail = nil, map[string]error{}
	_ = h.run(t)
	if got := h.takeCalls(); !slices.Equal(got, []string{"uninstall"}) {
		t.Fatalf("calls %v, want the interrupted uninstall finished, and nothing else", got)
	}
	if len(h.helm.releases) != 0 {
		t.Errorf("Helm storage still holds %d revision(s)", len(h.helm.releases))
	}
}

func TestForceUpgradesOnce(t *testing.T) {
	h := installedHarness(t)
	m := &Machine{Helm: h.helm, Recorder: h.recorder}
	req := h.request()
	req.Force = true
	if err := m.Run(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	wantCalls(t, h, "upgrade")
	h.mustRun(t)
	wantCalls(t, h)
}

func TestRenderFailureRecordsNoSnapshot(t *testing.T) {
	h := newHarness()
	h.helm.renderFails = true
	if err := h.run(t); err == nil {
		t.Fatal("render failure not reported")
	}
	if len(h.obj.Status.History) != 0 {
		t.Fatalf("history describes a release that is not in storage: %+v", h.obj.Status.History[0])
	}
	wantCondition(t, h, helmv2.ReleasedCondition, metav1.ConditionFalse, helmv2.InstallFailedReason)
	if c := conditions.Get(h.obj, helmv2.ReleasedCondition); !strings.Contains(c.Message, "error calling fail") {
		t.Errorf("message %q hides the render error", c.Message)
	}
}

// An upgrade that fails before Helm stores anything (the new chart does
// not render) names in its event's metadata the chart version and values
// it attempted, as upstream does, not the revision still deployed: alerts
// and commit statuses key on them.
func TestUnstoredFailureEventNamesTheAttempt(t *testing.T) {
	h := installedHarness(t)
	h.chart = newFakeChart("podinfo", "6.1.0")
	h.helm.renderFails = true
	if err := h.run(t); err == nil {
		t.Fatal("render failure not reported")
	}
	last := h.recorder.events[len(h.recorder.events)-1]
	group := helmv2.GroupVersion.Group + "/"
	if last.Reason != helmv2.UpgradeFailedReason || last.Meta[group+"revision"] != "6.1.0" || last.Meta[group+"token"] != h.configDigest() {
		t.Errorf("event %s with metadata %v, want UpgradeFailed naming revision 6.1.0 and token %s", last.Reason, last.Meta, h.configDigest())
	}
}

// awaitingMarker is the description internal/afterhooks gives a revision
// whose readiness wait is pending.
func awaitingMarker(deadline time.Time) string {
	return "Waiting for resources to become ready (afterHooks, deadline " + deadline.UTC().Format(time.RFC3339) + "); on success: Install complete"
}

func TestResumeAfterRestart(t *testing.T) {
	cases := []struct {
		name      string
		pending   common.Status
		resumeErr error
		wantCalls []string
		wantReady string
		readyTrue bool
	}{
		{name: "install finishes", pending: common.StatusPendingInstall,
			wantCalls: []string{"resume"}, wantReady: helmv2.InstallSucceededReason, readyTrue: true},
		{name: "upgrade finishes", pending: common.StatusPendingUpgrade,
			wantCalls: []string{"resume"}, wantReady: helmv2.UpgradeSucceededReason, readyTrue: true},
		{name: "install wait fails and is remediated", pending: common.StatusPendingInstall, resumeErr: errors.New("Deployment/default/app: InProgress"),
			wantCalls: []string{"resume", "uninstall"}, wantReady: helmv2.InstallFailedReason},
		{name: "upgrade wait fails and rolls back", pending: common.StatusPendingUpgrade, resumeErr: errors.New("Deployment/default/app: InProgress"),
			wantCalls: []string{"resume", "rollback"}, wantReady: helmv2.RollbackSucceededReason},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(func(o *v2.HelmRelease) {
				o.Spec.Install = &v2.Install{WaitStrategy: v2.AfterHooks}
				o.Spec.Install.Remediation = &helmv2.InstallRemediation{Retries: 3}
				o.Spec.Upgrade = &v2.Upgrade{WaitStrategy: v2.AfterHooks}
				o.Spec.Upgrade.Remediation = &helmv2.UpgradeRemediation{Retries: 3}
			})
			if tc.pending == common.StatusPendingUpgrade {
				h.mustRun(t) // v1 deployed
				h.values = map[string]any{"replicas": 2}
			}
			h.takeCalls()
			// The controller stopped during the wait: the newest revision is
			// pending with the afterHooks marker.
			chart, _ := h.chart.Load()
			rel := h.helm.newRelease(chart, h.values, tc.pending)
			rel.Info.Description = awaitingMarker(time.Now().Add(time.Minute))
			if tc.resumeErr != nil {
				h.helm.fail["resume"] = tc.resumeErr
			}

			err := h.run(t)
			if (err != nil) != (tc.resumeErr != nil) {
				t.Fatalf("run error %v, want error: %v", err, tc.resumeErr != nil)
			}
			wantCalls(t, h, tc.wantCalls...)
			status := metav1.ConditionFalse
			if tc.readyTrue {
				status = metav1.ConditionTrue
			}
			wantCondition(t, h, meta.ReadyCondition, status, tc.wantReady)
			if f := h.obj.Status.Failures; (f > 0) != (tc.resumeErr != nil) {
				t.Errorf("failures %d: a restart must not count as a failure, a failed wait must", f)
			}
		})
	}
}

func TestPendingWithoutMarkerIsUnlockedNotResumed(t *testing.T) {
	h := newHarness()
	chart, _ := h.chart.Load()
	h.helm.newRelease(chart, h.values, common.StatusPendingInstall).Info.Description = "Initial install underway"
	h.obj.Status.LastAttemptedReleaseAction = helmv2.ReleaseActionInstall
	_ = h.run(t)
	calls := h.takeCalls()
	// As upstream: the unlocked revision is failed, and a failed release
	// is tried again with an upgrade over it.
	if len(calls) < 2 || calls[0] != "unlock" || calls[1] != "upgrade" {
		t.Fatalf("calls %v, want unlock then an upgrade", calls)
	}
	if h.obj.Status.InstallFailures != 0 {
		t.Errorf("an interrupted install counted as a failure: %d", h.obj.Status.InstallFailures)
	}
	// As upstream: a Normal PendingRelease event names what was unlocked.
	var unlocked []recordedEvent
	for _, e := range h.recorder.events {
		if e.Reason == "PendingRelease" {
			unlocked = append(unlocked, e)
		}
	}
	want := "Unlocked Helm release default/app.v1 with chart podinfo@6.0.0 in pending-install state"
	if len(unlocked) != 1 || unlocked[0].Type != "Normal" || unlocked[0].Message != want {
		t.Errorf("PendingRelease events %+v, want one Normal %q", unlocked, want)
	}
}

// TestShutdownDuringAfterHooksWait stops the controller (SIGTERM, the OOM
// watch, lost leadership: the reconcile's context is cancelled) while an
// afterHooks revision waits for readiness. The revision must stay pending
// for the next run to resume: the interruption is no failure, and nothing
// is remediated, which would roll back or uninstall the revision the next
// controller is about to resume, with Helm actions a shutdown cannot stop.
func TestShutdownDuringAfterHooksWait(t *testing.T) {
	cases := []struct {
		name      string
		interrupt string
		deployed  bool // v1 is deployed before the interrupted reconcile
		pending   common.Status
	}{
		{name: "install", interrupt: "install", pending: common.StatusPendingInstall},
		{name: "upgrade", interrupt: "upgrade", deployed: true, pending: common.StatusPendingUpgrade},
		{name: "resumed upgrade", interrupt: "resume", deployed: true, pending: common.StatusPendingUpgrade},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(func(o *v2.HelmRelease) {
				o.Spec.Install = &v2.Install{WaitStrategy: v2.AfterHooks}
				o.Spec.Install.Remediation = &helmv2.InstallRemediation{Retries: 3}
				o.Spec.Upgrade = &v2.Upgrade{WaitStrategy: v2.AfterHooks}
				o.Spec.Upgrade.Remediation = &helmv2.UpgradeRemediation{Retries: 3}
			})
			if tc.deployed {
				h.mustRun(t)
				h.values = map[string]any{"replicas": 2}
			}
			if tc.interrupt == "resume" {
				chart, _ := h.chart.Load()
				h.helm.newRelease(chart, h.values, tc.pending).Info.Description = awaitingMarker(time.Now().Add(time.Minute))
			}
			h.takeCalls()
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			h.helm.interrupt, h.helm.shutdown = tc.interrupt, cancel

			m := &Machine{Helm: h.helm, Recorder: h.recorder}
			if err := m.Run(ctx, h.request()); err == nil {
				t.Fatal("an interrupted reconcile returned no error")
			}
			if got := h.takeCalls(); !reflect.DeepEqual(got, []string{tc.interrupt}) {
				t.Errorf("calls %v, want only %s: nothing may be remediated during a shutdown", got, tc.interrupt)
			}
			if last := h.helm.last(); last == nil || last.Info.Status != tc.pending {
				t.Errorf("release %v, want it %s for the next run to resume", last, tc.pending)
			}
			st := h.obj.Status
			if st.Failures != 0 || st.InstallFailures != 0 || st.UpgradeFailures != 0 {
				t.Errorf("failures %d (install %d, upgrade %d): an interrupted wait is no failure",
					st.Failures, st.InstallFailures, st.UpgradeFailures)
			}
			for _, e := range h.recorder.events {
				if strings.HasSuffix(e.Reason, "Failed") {
					t.Errorf("event %s %q reports an interruption as a failure", e.Reason, e.Message)
				}
			}
		})
	}
}

// TestDeprecatedStatusFieldsCleared checks that an attempt clears the status
// fields upstream deprecated (a HelmRelease last reconciled by an old
// controller may carry them), as upstream does on every attempt.
func TestDeprecatedStatusFieldsCleared(t *testing.T) {
	cases := []struct {
		name     string
		checksum string
		revision int
	}{
		{name: "both", checksum: "da39a3ee5e6b4b0d3255bfef95601890afd80709", revision: 3},
		{name: "checksum only", checksum: "da39a3ee5e6b4b0d3255bfef95601890afd80709"},
		{name: "revision only", revision: 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(func(obj *v2.HelmRelease) {
				obj.Status.LastAttemptedValuesChecksum = tc.checksum
				obj.Status.LastReleaseRevision = tc.revision
			})
			h.mustRun(t)
			if st := h.obj.Status; st.LastAttemptedValuesChecksum != "" || st.LastReleaseRevision != 0 {
				t.Errorf("lastAttemptedValuesChecksum=%q lastReleaseRevision=%d, want both cleared",
					st.LastAttemptedValuesChecksum, st.LastReleaseRevision)
			}
		})
	}
}

// TestOCIDigestOnlyChange checks that a new OCI artifact digest alone (the
// chart version unchanged, as with DisableChartDigestTracking) makes no new
// release, as upstream: the digest is recorded, the version decides.
func TestOCIDigestOnlyChange(t *testing.T) {
	cases := []struct {
		name      string
		from, to  string
		wantCalls []string
	}{
		{name: "same digest", from: "sha256:aaa", to: "sha256:aaa"},
		{name: "digest changed", from: "sha256:aaa", to: "sha256:bbb"},
		{name: "digest appears", from: "", to: "sha256:bbb"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness()
			m := &Machine{Helm: h.helm, Recorder: h.recorder}
			req := h.request()
			req.OCIDigest = tc.from
			if err := m.Run(context.Background(), req); err != nil {
				t.Fatal(err)
			}
			wantCalls(t, h, "install")
			req = h.request()
			req.OCIDigest = tc.to
			if err := m.Run(context.Background(), req); err != nil {
				t.Fatal(err)
			}
			wantCalls(t, h, tc.wantCalls...)
			if h.obj.Status.LastAttemptedRevisionDigest != tc.to {
				t.Errorf("lastAttemptedRevisionDigest %q, want %q", h.obj.Status.LastAttemptedRevisionDigest, tc.to)
			}
		})
	}
}

// TestProgressBeforeActions checks what a reconcile shows while Helm runs,
// as upstream: before each action, Reconciling says which action runs with
// which timeout, and before an install or upgrade Ready turns Unknown with
// the same message; Progress is told so the status can be written then.
func TestProgressBeforeActions(t *testing.T) {
	type seen struct {
		msg         string
		readyStatus metav1.ConditionStatus
	}
	dur := func(d time.Duration) *metav1.Duration { return &metav1.Duration{Duration: d} }
	cases := []struct {
		name   string
		mutate func(*v2.HelmRelease)
		change func(*harness)
		want   []seen
	}{
		{name: "install with defaults", want: []seen{{"Running 'install' action with timeout of 5m0s", metav1.ConditionUnknown}}},
		{name: "install and test with own timeouts", mutate: func(o *v2.HelmRelease) {
			o.Spec.Timeout = dur(2 * time.Minute)
			o.Spec.Install = &v2.Install{Install: helmv2.Install{Timeout: dur(90 * time.Second)}}
			o.Spec.Test = &helmv2.Test{Enable: true}
		}, want: []seen{
			{"Running 'install' action with timeout of 1m30s", metav1.ConditionUnknown},
			{"Running 'test' action with timeout of 2m0s", metav1.ConditionUnknown},
		}},
		{name: "upgrade", change: func(h *harness) { h.values = map[string]any{"replicas": 2} },
			want: []seen{{"Running 'upgrade' action with timeout of 5m0s", metav1.ConditionUnknown}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var mutate []func(*v2.HelmRelease)
			if tc.mutate != nil {
				mutate = append(mutate, tc.mutate)
			}
			h := newHarness(mutate...)
			var got []seen
			m := &Machine{Helm: h.helm, Recorder: h.recorder, Progress: func(msg string) {
				r := conditions.Get(h.obj, meta.ReconcilingCondition)
				if r == nil || r.Status != metav1.ConditionTrue || r.Reason != meta.ProgressingReason || r.Message != msg {
					t.Errorf("Reconciling %+v when told %q", r, msg)
				}
				got = append(got, seen{msg, conditions.Get(h.obj, meta.ReadyCondition).Status})
			}}
			if tc.change != nil {
				if err := m.Run(context.Background(), h.request()); err != nil {
					t.Fatal(err)
				}
				got = nil
				tc.change(h)
			}
			if err := m.Run(context.Background(), h.request()); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("progress %+v, want %+v", got, tc.want)
			}
		})
	}
}

// A reconcile that fails is never Ready, whatever state the release was
// in: here Helm storage cannot be read (a ServiceAccount without RBAC on
// Secrets), first for a release never installed, then for one that was.
func TestStorageErrorIsNeverReady(t *testing.T) {
	forbidden := errors.New(`secrets is forbidden: User "system:serviceaccount:default:missing" cannot list resource "secrets"`)
	for _, installed := range []bool{false, true} {
		t.Run(fmt.Sprintf("installed=%t", installed), func(t *testing.T) {
			h := newHarness()
			if installed {
				h.mustRun(t)
				h.takeCalls()
				h.recorder.events = nil
			}
			h.helm.storageErr = forbidden
			err := h.run(t)
			if err == nil || !strings.Contains(err.Error(), "forbidden") {
				t.Fatalf("Run = %v, want the storage error", err)
			}
			wantCalls(t, h)
			wantCondition(t, h, meta.ReadyCondition, metav1.ConditionFalse, "StateError")
			if msg := conditions.GetMessage(h.obj, meta.ReadyCondition); !strings.Contains(msg, "Could not determine release state") || !strings.Contains(msg, "cannot list resource \"secrets\"") {
				t.Errorf("Ready message %q does not name the cause", msg)
			}
			if n := len(h.recorder.events); n != 1 || h.recorder.events[0].Reason != "StateError" {
				t.Errorf("events %+v, want one StateError", h.recorder.events)
			}
		})
	}
}

// A failure before Helm stored a revision (a template error, an install
// refused up front) is a reconcile error retried with backoff, as
// upstream's: nothing counted towards remediation, nothing remediated, no
// stall. A typo in
// values must never roll back or uninstall a healthy release.
func TestFailureWithoutRevisionIsNotRemediated(t *testing.T) {
	for _, action := range []string{"install", "upgrade"} {
		t.Run(action, func(t *testing.T) {
			h := newHarness(func(o *v2.HelmRelease) {
				o.Spec.Upgrade = &v2.Upgrade{}
				o.Spec.Upgrade.Remediation = &helmv2.UpgradeRemediation{Retries: 3, RemediateLastFailure: ptrTo(true)}
			})
			failedReason := helmv2.InstallFailedReason
			if action == "upgrade" {
				h.mustRun(t)
				h.values = map[string]any{"replicas": 2}
				failedReason = helmv2.UpgradeFailedReason
			}
			h.takeCalls()
			h.helm.renderFails = true
			for i := 0; i < 3; i++ {
				err := h.run(t)
				if err == nil {
					t.Fatal("a render failure was not reported")
				}
				if errors.Is(err, ErrRetriesExhausted) || errors.As(err, new(*RetryAfterError)) {
					t.Fatalf("run %d: %v; want a plain error, retried with backoff", i+1, err)
				}
			}
			wantCalls(t, h, action, action, action)
			st := h.obj.Status
			// status.failures counts every failed reconcile, as upstream's;
			// remediation's counters only attempts Helm stored.
			if st.Failures != 3 || st.InstallFailures != 0 || st.UpgradeFailures != 0 {
				t.Errorf("failures %d (install %d, upgrade %d), want 3 (install 0, upgrade 0) for attempts Helm never stored", st.Failures, st.InstallFailures, st.UpgradeFailures)
			}
			wantCondition(t, h, meta.ReadyCondition, metav1.ConditionFalse, failedReason)
			if conditions.Get(h.obj, helmv2.RemediatedCondition) != nil || conditions.IsStalled(h.obj) {
				t.Errorf("remediated or stalled: %+v", h.obj.Status.Conditions)
			}
			if action == "upgrade" {
				if last := h.helm.last(); last.Version != 1 || last.Info.Status != common.StatusDeployed {
					t.Errorf("the healthy release became v%d %s", last.Version, last.Info.Status)
				}
			}
		})
	}
}

func ptrTo[T any](v T) *T { return &v }

// An install or upgrade that failed (its readiness wait timed out) but
// whose failure Helm could not record, because the cluster holding Helm
// storage could not be reached at that moment, is not counted or
// remediated: storage still has the revision pending. Remediating anyway
// rolled back over it and left it pending-upgrade in storage for good
// (found by test/reliability TestFaultsRemoteOutage: the remote cluster
// unreachable when an upgrade's wait timed out). The next reconcile finds
// the revision pending, unlocks it as failed and tries again, as after an
// interrupted action; the same happens under afterHooks, whose recording
// of the failure fails the same way.
func TestUnrecordedFailureIsNotRemediated(t *testing.T) {
	for _, action := range []string{"install", "upgrade"} {
		t.Run(action, func(t *testing.T) {
			h := newHarness(func(o *v2.HelmRelease) {
				o.Spec.Install = &v2.Install{}
				o.Spec.Install.Remediation = &helmv2.InstallRemediation{Retries: 3}
				o.Spec.Upgrade = &v2.Upgrade{}
				o.Spec.Upgrade.Remediation = &helmv2.UpgradeRemediation{Retries: 3}
			})
			if action == "upgrade" {
				h.mustRun(t)
				h.values = map[string]any{"replicas": 2}
			}
			h.takeCalls()
			h.helm.fail[action] = errors.New("context deadline exceeded")
			h.helm.unrecorded = true

			err := h.run(t)
			if err == nil || errors.Is(err, ErrRetriesExhausted) || errors.As(err, new(*RetryAfterError)) {
				t.Fatalf("Run = %v, want a plain error to retry with backoff", err)
			}
			wantCalls(t, h, action)
			if last := h.helm.last(); !last.Info.Status.IsPending() {
				t.Fatalf("the revision is %s in storage, want it still pending", last.Info.Status)
			}
			st := h.obj.Status
			if st.InstallFailures != 0 || st.UpgradeFailures != 0 || st.Failures != 1 {
				t.Errorf("failures %d (install %d, upgrade %d), want 1 (install 0, upgrade 0): the failure is not recorded",
					st.Failures, st.InstallFailures, st.UpgradeFailures)
			}
			if c := conditions.Get(h.obj, helmv2.RemediatedCondition); c != nil {
				t.Errorf("remediated: %+v", c)
			}

			// Storage can be written again: the pending revision is
			// unlocked and the action tried again.
			delete(h.helm.fail, action)
			h.helm.unrecorded = false
			h.mustRun(t)
			// As upstream: the unlocked revision is failed, and a failed
			// release is tried again with an upgrade.
			wantCalls(t, h, "unlock", "upgrade")
			for _, rel := range h.helm.releases {
				if rel.Info.Status.IsPending() {
					t.Errorf("v%d left %s in storage", rel.Version, rel.Info.Status)
				}
			}
			if last := h.helm.last(); last.Info.Status != common.StatusDeployed {
				t.Errorf("the release is %s, want deployed", last.Info.Status)
			}
		})
	}
}

// An error around a resumed wait that recorded no outcome (the API failed
// while recovering the held revision, or the write of deployed/failed did
// not land) is retried, never remediated: with install defaults that would
// uninstall a release whose resources may be ready.
func TestResumeTransientErrorIsNotRemediated(t *testing.T) {
	for _, pending := range []common.Status{common.StatusPendingInstall, common.StatusPendingUpgrade} {
		t.Run(pending.String(), func(t *testing.T) {
			h := newHarness(func(o *v2.HelmRelease) {
				o.Spec.Install = &v2.Install{WaitStrategy: v2.AfterHooks}
				o.Spec.Upgrade = &v2.Upgrade{WaitStrategy: v2.AfterHooks}
				o.Spec.Upgrade.Remediation = &helmv2.UpgradeRemediation{Retries: 3}
			})
			if pending == common.StatusPendingUpgrade {
				h.mustRun(t)
				h.values = map[string]any{"replicas": 2}
			}
			h.takeCalls()
			chart, _ := h.chart.Load()
			h.helm.newRelease(chart, h.values, pending).Info.Description = awaitingMarker(time.Now().Add(time.Minute))
			h.helm.fail["resume-transient"] = errors.New(`etcdserver: request timed out`)

			err := h.run(t)
			if err == nil || errors.Is(err, ErrRetriesExhausted) || errors.As(err, new(*RetryAfterError)) {
				t.Fatalf("Run = %v, want a plain error to retry with backoff", err)
			}
			wantCalls(t, h, "resume")
			if last := h.helm.last(); last.Info.Status != pending {
				t.Errorf("the held revision is %s, want it still %s for the next run", last.Info.Status, pending)
			}
			st := h.obj.Status
			if st.Failures != 0 || st.InstallFailures != 0 || st.UpgradeFailures != 0 {
				t.Errorf("failures %d (install %d, upgrade %d) for a transient error", st.Failures, st.InstallFailures, st.UpgradeFailures)
			}
			if conditions.IsTrue(h.obj, meta.ReadyCondition) {
				t.Errorf("Ready=True after a failed reconcile")
			}

			// The next run resumes the same revision and finishes it.
			delete(h.helm.fail, "resume-transient")
			h.mustRun(t)
			wantCalls(t, h, "resume")
			if last := h.helm.last(); last.Info.Status != common.StatusDeployed {
				t.Errorf("after the retry the revision is %s, want deployed", last.Info.Status)
			}
		})
	}
}

// A revision held for its readiness wait when the controller stopped, whose
// spec changed before the next run (values, chart), is not the desired
// state any more: it is superseded by the new revision, and its fate is
// not charged to the new attempt (with 0 retries that stalled the release
// and the new revision was never tried).
func TestStaleHeldRevisionIsSupersededNotCharged(t *testing.T) {
	h := newHarness(func(o *v2.HelmRelease) {
		o.Spec.Upgrade = &v2.Upgrade{WaitStrategy: v2.AfterHooks}
		o.Spec.Upgrade.Remediation = &helmv2.UpgradeRemediation{Retries: 0}
	})
	h.mustRun(t) // v1 deployed
	h.values = map[string]any{"replicas": 2}
	chart, _ := h.chart.Load()
	h.helm.newRelease(chart, h.values, common.StatusPendingUpgrade).Info.Description = awaitingMarker(time.Now().Add(time.Minute))
	h.obj.Status.LastAttemptedGeneration = h.obj.Generation
	h.obj.Status.LastAttemptedConfigDigest = h.configDigest()
	h.takeCalls()
	// v2's pods never become ready; the user changes the values to fix it.
	h.helm.fail["resume"] = errors.New("Deployment/default/app: InProgress")
	h.values = map[string]any{"replicas": 3}
	h.obj.Generation++

	if err := h.run(t); err != nil {
		t.Fatalf("reconcile failed: %v", err)
	}
	calls := h.takeCalls()
	for _, c := range calls {
		if c == "rollback" || c == "uninstall" {
			t.Fatalf("calls %v: the stale revision was remediated", calls)
		}
	}
	if len(calls) == 0 || calls[len(calls)-1] != "upgrade" {
		t.Fatalf("calls %v, want the new values upgraded to", calls)
	}
	var statuses []string
	for _, r := range h.helm.releases {
		statuses = append(statuses, r.Info.Status.String())
	}
	if want := []string{"superseded", "failed", "deployed"}; !reflect.DeepEqual(statuses, want) {
		t.Errorf("storage %v, want %v", statuses, want)
	}
	if got := h.helm.last().Config["replicas"]; got != 3 {
		t.Errorf("deployed values replicas=%v, want 3", got)
	}
	st := h.obj.Status
	if st.Failures != 0 || st.UpgradeFailures != 0 || conditions.IsStalled(h.obj) {
		t.Errorf("failures %d, upgrade failures %d, stalled %v: the new attempt was charged", st.Failures, st.UpgradeFailures, conditions.IsStalled(h.obj))
	}
	wantCondition(t, h, meta.ReadyCondition, metav1.ConditionTrue, helmv2.UpgradeSucceededReason)
}

// A remediation rollback that does not finish is not reported as a failed
// rollback: interrupted by shutdown it says nothing (the next run resumes
// or decides), abandoned for a new revision it says canceled.
func TestUnfinishedRollbackIsNotRollbackFailed(t *testing.T) {
	for _, tc := range []struct {
		name string
		// rollbackErr is what the rollback returns; shutdown is the
		// controller stopping while it runs.
		rollbackErr error
		shutdown    bool
		wantReason  string // Remediated reason; "" for none written
	}{
		{name: "interrupted by shutdown", shutdown: true,
			rollbackErr: fmt.Errorf("afterhooks: readiness wait interrupted: %w", context.Canceled)},
		{name: "abandoned for a new revision", wantReason: meta.HealthCheckCanceledReason,
			rollbackErr: &HealthCheckCanceledError{Trigger: "HelmRelease/default/app", Err: context.Canceled}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(func(o *v2.HelmRelease) {
				o.Spec.Upgrade = &v2.Upgrade{}
				o.Spec.Upgrade.Remediation = &helmv2.UpgradeRemediation{Retries: 1}
			})
			h.mustRun(t)
			h.takeCalls()
			h.chart = newFakeChart("podinfo", "6.1.0")
			h.helm.fail["upgrade"] = errors.New("deployment not ready")
			h.helm.fail["rollback"] = tc.rollbackErr
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if tc.shutdown {
				h.helm.onRollback = cancel
			}
			m := &Machine{Helm: h.helm, Recorder: h.recorder}
			if err := m.Run(ctx, h.request()); err == nil {
				t.Fatal("no error")
			}
			wantCalls(t, h, "upgrade", "rollback")
			c := conditions.Get(h.obj, helmv2.RemediatedCondition)
			switch {
			case tc.wantReason == "" && c != nil:
				t.Errorf("Remediated %s/%s: %s, want none", c.Status, c.Reason, c.Message)
			case tc.wantReason != "" && (c == nil || c.Reason != tc.wantReason):
				t.Errorf("Remediated %+v, want reason %s", c, tc.wantReason)
			}
			for _, e := range h.recorder.events {
				if e.Reason == helmv2.RollbackFailedReason {
					t.Errorf("event %+v", e)
				}
			}
		})
	}
}

// A held revision made from another OCI artifact (same chart version, new
// digest) is not resumed under the new digest: its snapshot would claim an
// artifact it was not made from. It is superseded by a new revision.
func TestHeldRevisionFromAnotherOCIArtifactIsSuperseded(t *testing.T) {
	h := newHarness(func(o *v2.HelmRelease) {
		o.Spec.Upgrade = &v2.Upgrade{WaitStrategy: v2.AfterHooks}
	})
	const oldDigest, newDigest = "sha256:aaaa", "sha256:bbbb"
	req := h.request()
	req.OCIDigest = oldDigest
	if err := (&Machine{Helm: h.helm, Recorder: h.recorder}).Run(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	chart, _ := h.chart.Load()
	h.helm.newRelease(chart, h.values, common.StatusPendingUpgrade).Info.Description = awaitingMarker(time.Now().Add(time.Minute))
	h.takeCalls()

	req = h.request()
	req.OCIDigest = newDigest
	if err := (&Machine{Helm: h.helm, Recorder: h.recorder}).Run(context.Background(), req); err != nil {
		t.Fatalf("reconcile failed: %v", err)
	}
	if calls := h.takeCalls(); reflect.DeepEqual(calls, []string{"resume"}) || len(calls) == 0 || calls[len(calls)-1] != "upgrade" {
		t.Fatalf("calls %v, want the held revision superseded by an upgrade", calls)
	}
	if latest := h.obj.Status.History.Latest(); latest.OCIDigest != newDigest || latest.Version != 3 {
		t.Errorf("latest snapshot v%d with OCI digest %q, want v3 with %q", latest.Version, latest.OCIDigest, newDigest)
	}
}

// What an action stored is known from what it wrote, not read back: an
// install reads storage once to find nothing and once to find it in sync,
// and an upgrade whose chart does not render the same.
func TestActionsDoNotReadStorageBack(t *testing.T) {
	h := newHarness()
	h.mustRun(t)
	if h.helm.storageReads != 2 {
		t.Errorf("install read storage %d times, want 2 (before and after)", h.helm.storageReads)
	}
	h.helm.storageReads = 0
	h.chart = newFakeChart("podinfo", "6.1.0")
	h.helm.renderFails = true
	if err := h.run(t); err == nil {
		t.Fatal("render failure not reported")
	}
	if h.helm.storageReads != 1 {
		t.Errorf("failed upgrade read storage %d times, want 1", h.helm.storageReads)
	}
	if n := len(h.obj.Status.History); n != 1 {
		t.Errorf("history has %d entries, want the installed release only", n)
	}
}

// An install or upgrade the controller's own shutdown cut short (Helm marks
// the revision failed with "context canceled") is not the release's
// failure: it is recorded but counted nowhere, neither towards remediation
// nor in status.failures, so the next controller tries again instead of
// stalling on used-up retries, and a rollout of the controller leaves the
// counters as they were.
func TestShutdownDuringActionIsNotCountedAgainstRetries(t *testing.T) {
	for _, action := range []string{"install", "upgrade"} {
		t.Run(action, func(t *testing.T) {
			h := newHarness()
			if action == "upgrade" {
				h.mustRun(t)
				h.values = map[string]any{"replicas": 2}
			}
			h.takeCalls()
			ctx, cancel := context.WithCancel(context.Background())
			cancel() // the controller is stopping while Helm works
			h.helm.fail[action] = fmt.Errorf("Release %q failed: %w", "app", context.Canceled)
			m := &Machine{Helm: h.helm, Recorder: h.recorder}
			if err := m.Run(ctx, h.request()); err == nil {
				t.Fatal("the interrupted action was not reported")
			}
			wantCalls(t, h, action)
			st := h.obj.Status
			if st.InstallFailures != 0 || st.UpgradeFailures != 0 || st.Failures != 0 {
				t.Errorf("failures %d, installFailures %d, upgradeFailures %d: a shutdown was charged to the release",
					st.Failures, st.InstallFailures, st.UpgradeFailures)
			}

			// The next controller: the same spec is tried again.
			delete(h.helm.fail, action)
			h.mustRun(t)
			if got := h.takeCalls(); len(got) == 0 || got[0] == "rollback" || got[0] == "uninstall" {
				t.Errorf("next run called %v, want the action again", got)
			}
			if last := h.helm.last(); last.Info.Status != common.StatusDeployed {
				t.Errorf("latest revision %s after the next run", last.Info.Status)
			}
		})
	}
}

// A rollback the controller was killed in the middle of (Helm wrote its
// revision pending-rollback, then the process died, before any afterHooks
// marker) is a remediation cut short. The next controller unlocks it and
// rolls back again, instead of stalling on the upgrade's used-up retries
// with the cluster half rolled back. Found by the reliability suite
// (test/reliability, SIGKILL in the rollback's pre hooks).
func TestInterruptedRollbackIsDoneAgain(t *testing.T) {
	h := newHarness(func(o *v2.HelmRelease) {
		o.Spec.Upgrade = &v2.Upgrade{Upgrade: helmv2.Upgrade{
			Remediation: &helmv2.UpgradeRemediation{Retries: 0, RemediateLastFailure: ptrTo(true)},
		}}
	})
	h.mustRun(t) // v1 deployed
	h.takeCalls()
	good := h.values
	h.values = map[string]any{"replicas": 2}
	h.obj.Generation = 2
	h.helm.fail["upgrade"] = errors.New("readiness wait failed")
	ctx, cancel := context.WithCancel(context.Background())
	h.helm.onRollback = func() {
		// Helm writes the rollback's revision first; then the process dies.
		h.helm.newRelease(h.helm.releases[0].Chart, good, common.StatusPendingRollback)
		cancel()
	}
	h.helm.fail["rollback"] = context.Canceled
	m := &Machine{Helm: h.helm, Recorder: h.recorder}
	if err := m.Run(ctx, h.request()); err == nil {
		t.Fatal("the failed upgrade was not reported")
	}
	if got := h.takeCalls(); !slices.Equal(got, []string{"upgrade", "rollback"}) {
		t.Fatalf("calls %v, want the upgrade and the rollback it was killed in", got)
	}

	// The next controller.
	h.helm.onRollback, h.helm.fail = nil, map[string]error{}
	_ = h.run(t)
	if got := h.takeCalls(); !slices.Equal(got, []string{"unlock", "rollback"}) {
		t.Fatalf("calls %v, want the interrupted rollback unlocked and done again", got)
	}
	last := h.helm.last()
	if last.Info.Status != common.StatusDeployed || last.Config["replicas"] != 1 {
		t.Errorf("latest revision v%d %s with %v, want the good values deployed again", last.Version, last.Info.Status, last.Config)
	}
	wantCondition(t, h, helmv2.RemediatedCondition, metav1.ConditionTrue, helmv2.RollbackSucceededReason)
	if st := h.obj.Status; st.UpgradeFailures != 1 || st.Failures != 1 {
		t.Errorf("upgradeFailures %d, failures %d, want the one failed upgrade only", st.UpgradeFailures, st.Failures)
	}

	// Settled: a further reconcile does nothing.
	_ = h.run(t)
	if got := h.takeCalls(); len(got) != 0 {
		t.Errorf("a further reconcile called %v", got)
	}
}

// An uninstall remediating a failed install that a controller kill cut
// short leaves the release "uninstalling" in Helm storage. The next
// controller finishes the uninstall, instead of taking the release for an
// unmanaged one and upgrading it in a loop ("has no deployed releases").
// Found by the reliability suite (SIGKILL during install remediation).
func TestInterruptedUninstallRemediationIsDoneAgain(t *testing.T) {
	h := newHarness(func(o *v2.HelmRelease) {
		o.Spec.Install = &v2.Install{Install: helmv2.Install{
			Remediation: &helmv2.InstallRemediation{Retries: 0, RemediateLastFailure: ptrTo(true)},
		}}
	})
	h.helm.fail["install"] = errors.New("readiness wait failed")
	ctx, cancel := context.WithCancel(context.Background())
	h.helm.onUninstall = func() {
		// Helm marks the release uninstalling first; then the process dies.
		h.helm.last().Info.Status = common.StatusUninstalling
		cancel()
	}
	h.helm.fail["uninstall"] = context.Canceled
	m := &Machine{Helm: h.helm, Recorder: h.recorder}
	if err := m.Run(ctx, h.request()); err == nil {
		t.Fatal("the failed install was not reported")
	}
	if got := h.takeCalls(); !slices.Equal(got, []string{"install", "uninstall"}) {
		t.Fatalf("calls %v, want the install and the uninstall it was killed in", got)
	}

	// The next controller.
	h.helm.onUninstall, h.helm.fail = nil, map[string]error{}
	_ = h.run(t)
	if got := h.takeCalls(); !slices.Equal(got, []string{"uninstall"}) {
		t.Fatalf("calls %v, want the interrupted uninstall done again, and nothing else (retries are used up)", got)
	}
	if len(h.helm.releases) != 0 {
		t.Errorf("Helm storage still holds %d revision(s)", len(h.helm.releases))
	}
	wantCondition(t, h, helmv2.RemediatedCondition, metav1.ConditionTrue, helmv2.UninstallSucceededReason)
	if st := h.obj.Status; st.InstallFailures != 1 || st.Failures != 1 {
		t.Errorf("installFailures %d, failures %d, want the one failed install only", st.InstallFailures, st.Failures)
	}
	_ = h.run(t)
	if got := h.takeCalls(); len(got) != 0 {
		t.Errorf("a further reconcile called %v", got)
	}
}

// Before a remediation runs, the caller is told (Progress) with the failure
// already counted, so that the counters reach the API server before Helm
// works: a controller killed in the middle of the remediation must not
// lose the failure that caused it, or the next one would retry the failed
// action and remediate it a second time (found by the reliability suite).
func TestRemediationIsAnnouncedWithTheFailureCounted(t *testing.T) {
	for _, tc := range []struct {
		action, remediation string
	}{
		{"install", "uninstall"},
		{"upgrade", "rollback"},
	} {
		t.Run(tc.action, func(t *testing.T) {
			h := newHarness(func(o *v2.HelmRelease) {
				o.Spec.Install = &v2.Install{Install: helmv2.Install{
					Remediation: &helmv2.InstallRemediation{Retries: 0, RemediateLastFailure: ptrTo(true)}}}
				o.Spec.Upgrade = &v2.Upgrade{Upgrade: helmv2.Upgrade{
					Remediation: &helmv2.UpgradeRemediation{Retries: 0, RemediateLastFailure: ptrTo(true)}}}
			})
			if tc.action == "upgrade" {
				h.mustRun(t)
				h.values = map[string]any{"replicas": 2}
				h.obj.Generation = 2
			}
			h.helm.fail[tc.action] = errors.New("readiness wait failed")
			var seen []string
			m := &Machine{Helm: h.helm, Recorder: h.recorder, Progress: func(msg string) {
				st := h.obj.Status
				seen = append(seen, fmt.Sprintf("%s (failures %d/%d)", msg, st.InstallFailures, st.UpgradeFailures))
			}}
			_ = m.Run(context.Background(), h.request())
			want := fmt.Sprintf("Running '%s' action", tc.remediation)
			for _, s := range seen {
				if strings.HasPrefix(s, want) {
					if !strings.HasSuffix(s, "(failures 1/0)") && !strings.HasSuffix(s, "(failures 0/1)") {
						t.Errorf("announced %q before the failure was counted", s)
					}
					return
				}
			}
			t.Errorf("the %s was never announced; progress: %v", tc.remediation, seen)
		})
	}
}

// A rollback Helm finished (its revision deployed in storage) whose
// controller was killed before writing the status: the history does not
// have the revision. The next controller records it as the rollback it is,
// instead of taking it for an unmanaged release and upgrading over it to
// the values that just failed (found by the reliability suite: SIGKILL at
// the rollback's storage commit).
func TestFinishedButUnrecordedRollbackIsRecorded(t *testing.T) {
	h := newHarness(func(o *v2.HelmRelease) {
		o.Spec.Upgrade = &v2.Upgrade{Upgrade: helmv2.Upgrade{
			Remediation: &helmv2.UpgradeRemediation{Retries: 0, RemediateLastFailure: ptrTo(true)},
		}}
	})
	h.mustRun(t) // v1 deployed
	h.values = map[string]any{"replicas": 2}
	h.obj.Generation = 2
	h.helm.fail["upgrade"] = errors.New("readiness wait failed")
	if err := h.run(t); err == nil {
		t.Fatal("the failed upgrade was not reported")
	}
	if got := h.takeCalls(); !slices.Equal(got, []string{"install", "upgrade", "rollback"}) {
		t.Fatalf("calls %v", got)
	}
	rolledBack := h.helm.last()
	rolledBack.Info.Description = "Rollback to 1"
	// The status write of that reconcile never happened, except what was
	// reported before the rollback ran (Progress): everything up to the
	// failed upgrade and its count, nothing of the rollback.
	h.obj.Status.History = h.obj.Status.History[1:]
	h.obj.Status.History[1].Status = "deployed"
	conditions.Delete(h.obj, helmv2.RemediatedCondition)

	// The next controller.
	delete(h.helm.fail, "upgrade")
	_ = h.run(t)
	if got := h.takeCalls(); len(got) != 0 {
		t.Fatalf("calls %v, want none: the rollback is done, the upgrade's retries used up", got)
	}
	latest := h.obj.Status.History.Latest()
	if latest.Version != rolledBack.Version || latest.Status != "deployed" || latest.Action != helmv2.ReleaseActionRollback {
		t.Errorf("latest snapshot %+v, want the rollback v%d deployed", latest, rolledBack.Version)
	}
	wantCondition(t, h, helmv2.RemediatedCondition, metav1.ConditionTrue, helmv2.RollbackSucceededReason)
	if st := h.obj.Status; st.UpgradeFailures != 1 {
		t.Errorf("upgradeFailures %d, want 1", st.UpgradeFailures)
	}
}

// A `helm rollback` by hand of a healthy release is not a remediation this
// controller could have run (it rolls back only after a failure): the
// next reconcile takes the release as unmanaged and upgrades it back to
// the desired state, as upstream does.
func TestRollbackByHandIsUpgradedOver(t *testing.T) {
	h := newHarness()
	h.mustRun(t) // v1 deployed
	h.values = map[string]any{"replicas": 2}
	h.obj.Generation = 2
	h.mustRun(t) // v2 deployed
	h.takeCalls()

	h.helm.rollbackByHand(1)

	h.mustRun(t)
	if got := h.takeCalls(); !slices.Equal(got, []string{"upgrade"}) {
		t.Fatalf("calls %v, want an upgrade over the rollback made by hand", got)
	}
	latest := h.obj.Status.History.Latest()
	if latest.Version != 4 || latest.Status != "deployed" || latest.Action != helmv2.ReleaseActionUpgrade {
		t.Errorf("latest snapshot %+v, want the upgrade v4 deployed", latest)
	}
	if c := conditions.Get(h.obj, helmv2.RemediatedCondition); c != nil {
		t.Errorf("Remediated %s/%s: nothing was remediated", c.Status, c.Reason)
	}
}

// An upgrade Helm finished (its revision deployed in storage) whose
// controller was killed before writing the status: the history lacks the
// revision. The next controller records it, made as it is from the desired
// chart and values, instead of upgrading again and running the hooks once
// more (found by the reliability suite: SIGKILL at an afterHooks upgrade's
// storage commit).
func TestFinishedButUnrecordedUpgradeIsRecorded(t *testing.T) {
	h := newHarness()
	h.mustRun(t) // v1 deployed
	written := h.obj.Status.DeepCopy()
	h.values = map[string]any{"replicas": 2}
	h.obj.Generation = 2
	h.mustRun(t) // v2 deployed
	h.takeCalls()
	// The status write of that reconcile never happened.
	lastAttempted := h.obj.Status
	h.obj.Status = *written
	h.obj.Status.LastAttemptedGeneration, h.obj.Status.LastAttemptedConfigDigest = lastAttempted.LastAttemptedGeneration, lastAttempted.LastAttemptedConfigDigest
	h.obj.Status.LastAttemptedReleaseAction = helmv2.ReleaseActionUpgrade

	h.mustRun(t)
	if got := h.takeCalls(); len(got) != 0 {
		t.Fatalf("calls %v, want none: v2 is the desired release", got)
	}
	latest := h.obj.Status.History.Latest()
	if latest.Version != 2 || latest.Status != "deployed" {
		t.Errorf("latest snapshot v%d %s, want v2 deployed", latest.Version, latest.Status)
	}
	if prev := h.obj.Status.History[1]; prev.Version != 1 || prev.Status != "superseded" {
		t.Errorf("previous snapshot v%d %s, want v1 superseded", prev.Version, prev.Status)
	}
	wantCondition(t, h, meta.ReadyCondition, metav1.ConditionTrue, helmv2.UpgradeSucceededReason)
}

// A SIGKILL after Helm stored a first install as deployed and before the
// status recorded it (found by the reliability suite's storage commit
// cell) leaves the status as the announce wrote it: the install attempted,
// the history empty. The release is the desired one: recorded, not
// upgraded again with its hooks.
func TestFinishedButUnrecordedInstallIsRecorded(t *testing.T) {
	h := newHarness()
	h.mustRun(t) // v1 deployed
	h.takeCalls()
	lastAttempted := h.obj.Status
	h.obj.Status = v2.HelmReleaseStatus{HelmReleaseStatus: helmv2.HelmReleaseStatus{
		LastAttemptedGeneration:    lastAttempted.LastAttemptedGeneration,
		LastAttemptedConfigDigest:  lastAttempted.LastAttemptedConfigDigest,
		LastAttemptedRevision:      lastAttempted.LastAttemptedRevision,
		LastAttemptedReleaseAction: helmv2.ReleaseActionInstall,
	}}

	h.mustRun(t)
	if got := h.takeCalls(); len(got) != 0 {
		t.Fatalf("calls %v, want none: v1 is the desired release", got)
	}
	latest := h.obj.Status.History.Latest()
	if latest == nil || latest.Version != 1 || latest.Status != "deployed" {
		t.Fatalf("history %v, want v1 deployed", h.obj.Status.History)
	}
	wantCondition(t, h, meta.ReadyCondition, metav1.ConditionTrue, helmv2.InstallSucceededReason)
}

// A release with the desired chart and values that the HelmRelease never
// attempted to install (made by someone else, say helm install) is
// upgraded to be taken over, as upstream does.
func TestForeignReleaseWithoutHistoryIsUpgraded(t *testing.T) {
	h := newHarness()
	h.mustRun(t) // v1 deployed
	h.takeCalls()
	h.obj.Status = v2.HelmReleaseStatus{}

	h.mustRun(t)
	if got := h.takeCalls(); len(got) != 1 || !strings.HasPrefix(got[0], "upgrade") {
		t.Fatalf("calls %v, want one upgrade", got)
	}
}

// A chart whose resource order cannot be worked out (a cycle, a broken
// ordering annotation) fails while Helm renders, before anything is stored
// or applied. Retrying renders the same chart again: the release stalls
// until the chart changes.
func TestInvalidOrderStalls(t *testing.T) {
	h := newHarness()
	h.helm.renderFails = true
	h.helm.renderErr = fmt.Errorf("error while running post render on files: %w",
		&sequencing.CycleError{Chart: "app", What: "resource groups", Cycle: []string{"a", "b", "a"}})
	err := h.run(t)
	if !errors.Is(err, ErrChartCannotApply) {
		t.Fatalf("Run = %v, want ErrChartCannotApply", err)
	}
	wantCondition(t, h, helmv2.ReleasedCondition, metav1.ConditionFalse, helmv2.InstallFailedReason)
	if c := conditions.Get(h.obj, helmv2.ReleasedCondition); !strings.Contains(c.Message, "cycle: a → b → a") {
		t.Errorf("message %q does not name the cycle", c.Message)
	}
	if len(h.obj.Status.History) != 0 {
		t.Errorf("history %v for a release that was never stored", h.obj.Status.History)
	}
}

// A first install that failed is retried after a change of values the
// way upstream retries it: an upgrade over the failed revision (upgrade
// hooks, Upgrade* reasons), not a second install that replaces it.
func TestFailedInstallRetriedAfterChangeIsUpgraded(t *testing.T) {
	cases := []struct {
		name        string
		stillFails  bool
		wantReady   metav1.ConditionStatus
		wantReason  string
		wantHistory string
	}{
		{name: "the upgrade succeeds", wantReady: metav1.ConditionTrue, wantReason: helmv2.UpgradeSucceededReason,
			wantHistory: "v2 deployed, v1 superseded"},
		{name: "the upgrade fails too", stillFails: true, wantReady: metav1.ConditionFalse, wantReason: helmv2.UpgradeFailedReason,
			wantHistory: "v2 failed, v1 failed"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness()
			h.helm.fail["install"] = errors.New("timed out waiting for the condition")
			if err := h.run(t); !errors.Is(err, ErrRetriesExhausted) {
				t.Fatalf("first install: %v, want retries exhausted (install.remediation.retries is 0)", err)
			}
			wantCalls(t, h, "install")

			delete(h.helm.fail, "install")
			if tc.stillFails {
				h.helm.fail["upgrade"] = errors.New("timed out waiting for the condition")
			}
			h.values = map[string]any{"replicas": 2}
			h.obj.Generation = 2
			_ = h.run(t)
			wantCalls(t, h, "upgrade")
			wantCondition(t, h, helmv2.ReleasedCondition, tc.wantReady, tc.wantReason)
			wantCondition(t, h, meta.ReadyCondition, tc.wantReady, tc.wantReason)
			if got := h.obj.Status.LastAttemptedReleaseAction; got != helmv2.ReleaseActionUpgrade {
				t.Errorf("last attempted action %q, want upgrade", got)
			}
			if latest := h.obj.Status.History.Latest(); latest == nil || latest.Version != 2 || latest.Action != helmv2.ReleaseActionUpgrade {
				t.Errorf("latest snapshot %+v, want v2 made by an upgrade", latest)
			}
			// As Helm does in storage, the upgrade supersedes the failed
			// revision it was made over; as upstream's, the history keeps
			// the latest revision and the one before it.
			if got, want := snapshotStatuses(h.obj.Status.History), tc.wantHistory; got != want {
				t.Errorf("history %s, want %s", got, want)
			}
		})
	}
}

// snapshotStatuses is "v<version> <status>" of each snapshot, newest first.
func snapshotStatuses(history helmv2.Snapshots) string {
	var out []string
	for _, s := range history {
		out = append(out, fmt.Sprintf("v%d %s", s.Version, s.Status))
	}
	return strings.Join(out, ", ")
}

// TestUpgradeFailureWithoutRollbackTarget: a release that never deployed
// (its install failed, its upgrades too) fails an upgrade whose
// remediation is a rollback. There is nothing to roll back to: as
// upstream, the reconcile stops with ErrMissingRollbackTarget, without a
// rollback, a Remediated condition, an event of its own or another
// failure counted, and the next run (nothing changed) stops the same way
// without retrying the upgrade.
func TestUpgradeFailureWithoutRollbackTarget(t *testing.T) {
	h := newHarness()
	h.helm.fail["install"] = errors.New("timed out waiting for the condition")
	if err := h.run(t); !errors.Is(err, ErrRetriesExhausted) {
		t.Fatalf("first install: %v", err)
	}
	h.takeCalls()
	h.helm.fail["upgrade"] = errors.New("timed out waiting for the condition")
	h.obj.Spec.Upgrade = &v2.Upgrade{}
	h.obj.Spec.Upgrade.Remediation = &helmv2.UpgradeRemediation{Retries: 1}
	h.values = map[string]any{"replicas": 2}
	h.obj.Generation = 2
	h.obj.Status.ClearFailures()
	events := len(h.recorder.events)

	for run := 1; run <= 2; run++ {
		err := h.run(t)
		if !errors.Is(err, ErrMissingRollbackTarget) || err.Error() != "missing target release for rollback: cannot remediate failed release" {
			t.Fatalf("run %d: %v, want %v", run, err, ErrMissingRollbackTarget)
		}
		if run == 1 {
			wantCalls(t, h, "upgrade")
		} else {
			wantCalls(t, h)
		}
		wantCondition(t, h, meta.ReadyCondition, metav1.ConditionFalse, helmv2.UpgradeFailedReason)
		if c := conditions.Get(h.obj, helmv2.RemediatedCondition); c != nil {
			t.Errorf("run %d: Remediated %s/%s, want none", run, c.Status, c.Reason)
		}
		if got := h.obj.Status.UpgradeFailures; got != 1 {
			t.Errorf("run %d: %d upgrade failures, want 1", run, got)
		}
		if got := snapshotStatuses(h.obj.Status.History); got != "v2 failed, v1 failed" {
			t.Errorf("run %d: history %s", run, got)
		}
	}
	if got := h.recorder.events[events:]; len(got) != 1 {
		t.Errorf("events %v, want only the upgrade's failure", got)
	}
}

// TestRolledBackReleaseInSyncIsUpgradeSucceeded: a failed upgrade was
// rolled back; the spec then goes back to what the rollback restored. The release is in sync without an action:
// as upstream, Remediated gives way to Released True/UpgradeSucceeded,
// and the release is Ready, with no new revision.
func TestRolledBackReleaseInSyncIsUpgradeSucceeded(t *testing.T) {
	h := newHarness(func(o *v2.HelmRelease) {
		o.Spec.Upgrade = &v2.Upgrade{}
		o.Spec.Upgrade.Remediation = &helmv2.UpgradeRemediation{Retries: 1}
	})
	h.mustRun(t)
	working := h.values
	h.values = map[string]any{"replicas": 3}
	h.obj.Generation = 2
	h.helm.fail["upgrade"] = errors.New("deployment not ready")
	if err := h.run(t); err == nil {
		t.Fatal("the upgrade's failure is not reported")
	}
	wantCondition(t, h, helmv2.RemediatedCondition, metav1.ConditionTrue, helmv2.RollbackSucceededReason)
	h.takeCalls()

	delete(h.helm.fail, "upgrade")
	h.values = working
	h.obj.Generation = 3
	h.mustRun(t)
	wantCalls(t, h)
	wantCondition(t, h, meta.ReadyCondition, metav1.ConditionTrue, helmv2.UpgradeSucceededReason)
	wantCondition(t, h, helmv2.ReleasedCondition, metav1.ConditionTrue, helmv2.UpgradeSucceededReason)
	if c := conditions.Get(h.obj, helmv2.RemediatedCondition); c != nil {
		t.Errorf("Remediated %s/%s, want none", c.Status, c.Reason)
	}
	if got, want := conditions.GetMessage(h.obj, helmv2.ReleasedCondition), "Helm upgrade succeeded for release default/app.v3 with chart podinfo@6.0.0"; got != want {
		t.Errorf("Released message %q, want %q", got, want)
	}
}

// TestHistoryIsCutWhereUpstreamCutsIt: the history keeps every revision
// until the release is found in sync again (or a remediation or retry
// starts), as upstream's does. An upgrade that fails without remediation
// leaves the revision before the last deployed one in the history; the
// next in-sync reconcile cuts it after the first earlier revision that
// deployed.
func TestHistoryIsCutWhereUpstreamCutsIt(t *testing.T) {
	h := newHarness()
	h.mustRun(t)
	h.values = map[string]any{"replicas": 2}
	h.obj.Generation = 2
	h.mustRun(t)
	if got := snapshotStatuses(h.obj.Status.History); got != "v2 deployed, v1 superseded" {
		t.Fatalf("after a working upgrade: history %s", got)
	}
	h.values = map[string]any{"replicas": 3}
	h.obj.Generation = 3
	h.helm.fail["upgrade"] = errors.New("timed out waiting for the condition")
	if err := h.run(t); err == nil {
		t.Fatal("the failing upgrade is not reported")
	}
	if got := snapshotStatuses(h.obj.Status.History); got != "v3 failed, v2 deployed, v1 superseded" {
		t.Errorf("after a failing upgrade without remediation: history %s, want every revision (as upstream)", got)
	}

	delete(h.helm.fail, "upgrade")
	h.values = map[string]any{"replicas": 4}
	h.obj.Generation = 4
	h.obj.Status.ClearFailures()
	h.mustRun(t)
	h.mustRun(t)
	// Cut after the first earlier revision that deployed (Helm marked v2
	// superseded when v4 deployed), as upstream's Truncate does.
	if got := snapshotStatuses(h.obj.Status.History); got != "v4 deployed, v3 failed, v2 superseded" {
		t.Errorf("in sync after a working upgrade: history %s, want it cut after v2", got)
	}
}

// TestReadyAwaitsTests: while the tests of a new release run, the status
// written says so, as upstream's: TestSuccess Unknown AwaitingTests and,
// when test failures count, Ready with it; when they are ignored, Ready
// already tells the release's success.
func TestReadyAwaitsTests(t *testing.T) {
	const awaiting = "Helm release default/app.v1 with chart podinfo@6.0.0 is awaiting tests"
	cases := []struct {
		name       string
		ignore     bool
		wantReady  metav1.ConditionStatus
		wantReason string
		// wantFinal is Ready's reason once the tests passed.
		wantFinal string
	}{
		{name: "failures count", wantReady: metav1.ConditionUnknown, wantReason: "AwaitingTests", wantFinal: helmv2.TestSucceededReason},
		{name: "failures ignored", ignore: true, wantReady: metav1.ConditionTrue, wantReason: helmv2.InstallSucceededReason, wantFinal: helmv2.InstallSucceededReason},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(func(o *v2.HelmRelease) { o.Spec.Test = &helmv2.Test{Enable: true, IgnoreFailures: tc.ignore} })
			var ready, tested *metav1.Condition
			m := &Machine{Helm: h.helm, Recorder: h.recorder, Progress: func(msg string) {
				if strings.Contains(msg, "'test'") {
					ready = conditions.Get(h.obj, meta.ReadyCondition).DeepCopy()
					tested = conditions.Get(h.obj, helmv2.TestSuccessCondition).DeepCopy()
				}
			}}
			if err := m.Run(context.Background(), h.request()); err != nil {
				t.Fatal(err)
			}
			if tested == nil || tested.Status != metav1.ConditionUnknown || tested.Reason != "AwaitingTests" || tested.Message != awaiting {
				t.Errorf("TestSuccess while the tests ran: %+v, want Unknown AwaitingTests %q", tested, awaiting)
			}
			if ready == nil || ready.Status != tc.wantReady || ready.Reason != tc.wantReason {
				t.Errorf("Ready while the tests ran: %+v, want %s %s", ready, tc.wantReady, tc.wantReason)
			}
			wantCondition(t, h, meta.ReadyCondition, metav1.ConditionTrue, tc.wantFinal)
			wantCondition(t, h, helmv2.TestSuccessCondition, metav1.ConditionTrue, helmv2.TestSucceededReason)
		})
	}
}

// TestNewAttempt: failures are counted afresh for another generation,
// chart version or values, as upstream's reset check; an OCI digest alone
// (the version unchanged, as under DisableChartDigestTracking) is not a new
// attempt there either: with digest tracking on, the version carries it.
func TestNewAttempt(t *testing.T) {
	h := newHarness()
	attempted := func() *Request {
		req := h.request()
		req.OCIDigest = "sha256:aaa"
		st := &req.Object.Status
		st.LastAttemptedGeneration = req.Object.Generation
		st.LastAttemptedRevision = req.Chart.Metadata().Version
		st.LastAttemptedRevisionDigest = req.OCIDigest
		st.LastAttemptedConfigDigest = req.ConfigDigest
		return req
	}
	cases := []struct {
		name   string
		change func(*Request)
		want   bool
	}{
		{name: "same", change: func(*Request) {}},
		{name: "OCI digest only", change: func(r *Request) { r.OCIDigest = "sha256:bbb" }},
		{name: "generation", change: func(r *Request) { r.Object.Generation++ }, want: true},
		{name: "chart version", change: func(r *Request) { r.Object.Status.LastAttemptedRevision = "0.0.1" }, want: true},
		{name: "values", change: func(r *Request) { r.Object.Status.LastAttemptedConfigDigest = "sha256:0000" }, want: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			req := attempted()
			tc.change(req)
			if got := newAttempt(req); got != tc.want {
				t.Errorf("newAttempt = %v, want %v", got, tc.want)
			}
		})
	}
}
