package reconcile

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"time"

	"github.com/fluxcd/pkg/ssa"
	"github.com/fluxcd/pkg/ssa/jsondiff"
	chartv2 "helm.sh/helm/v4/pkg/chart/v2"
	"helm.sh/helm/v4/pkg/release/common"
	releasev1 "helm.sh/helm/v4/pkg/release/v1"
	"helm.sh/helm/v4/pkg/storage/driver"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/afterhooks/helm-controller/internal/ownrevision"
)

// fakeHelm keeps releases in memory and behaves like Helm storage does
// for the actions the machine runs; failures are injected per action.
type fakeHelm struct {
	name, namespace string
	releases        []*releasev1.Release // oldest first
	fail            map[string]error     // action -> error to return
	testFails       bool
	renderFails     bool  // the next install/upgrade fails before storage is written
	renderErr       error // the error of a render failure; a template error when nil
	// unrecorded: a failing install/upgrade cannot record its failure, as
	// when Helm's write of the failed status does not land (the cluster
	// became unreachable): storage keeps the revision pending.
	unrecorded bool
	calls      []string
	now        time.Time
	// drift is what DetectDrift reports, one set per call (the last one
	// repeats); detectErr and correctErr fail those calls.
	drift      []jsondiff.DiffSet
	detectErr  error
	correctErr error
	// storageErr fails every read of Helm storage (e.g. RBAC forbids it).
	storageErr error
	// interrupt names the action ("install", "upgrade", "resume") during
	// whose afterHooks readiness wait the controller shuts down: shutdown
	// is called (it cancels the reconcile's context), the revision stays
	// pending with the afterHooks marker, and the context's error is
	// returned, as an interrupted afterHooks wait (afterhooks.Start) does.
	interrupt string
	shutdown  func()
	// onRollback is called when a rollback starts.
	onRollback func()
	// onUninstall is called when an uninstall starts.
	onUninstall func()
	// written is the release last written by an action, as LastWritten
	// reports it; the harness clears it before each reconcile, as each
	// reconcile has a runner of its own.
	written *releasev1.Release
	// storageReads counts LastRelease calls.
	storageReads int
}

func (f *fakeHelm) LastWritten() *releasev1.Release { return f.written }

func newFakeHelm() *fakeHelm {
	return &fakeHelm{name: "app", namespace: "default", fail: map[string]error{}, now: time.Unix(1_700_000_000, 0)}
}

func (f *fakeHelm) last() *releasev1.Release {
	if len(f.releases) == 0 {
		return nil
	}
	return f.releases[len(f.releases)-1]
}

func (f *fakeHelm) LastRelease(context.Context) (*releasev1.Release, error) {
	f.storageReads++
	if f.storageErr != nil {
		return nil, f.storageErr
	}
	if rel := f.last(); rel != nil {
		return rel, nil
	}
	return nil, driver.ErrReleaseNotFound
}

func (f *fakeHelm) newRelease(chart *chartv2.Chart, values map[string]any, status common.Status) *releasev1.Release {
	version := 1
	if prev := f.last(); prev != nil {
		version = prev.Version + 1
	}
	f.now = f.now.Add(time.Minute)
	rel := &releasev1.Release{
		Name: f.name, Namespace: f.namespace, Version: version, Chart: chart, Config: values,
		Info: &releasev1.Info{Status: status, FirstDeployed: f.now, LastDeployed: f.now},
	}
	f.releases = append(f.releases, rel)
	f.written = rel
	return rel
}

// deploy stores the revision of an install, upgrade or rollback the
// machine runs, as Helm and the controller's storage do: with the labels
// Helm carries over (labels; nil for an install) and the machine's mark.
func (f *fakeHelm) deploy(action string, chart *chartv2.Chart, values map[string]any, labels map[string]string, mark ownrevision.Mark) (*releasev1.Release, error) {
	f.calls = append(f.calls, action)
	store := func(status common.Status) *releasev1.Release {
		rel := f.newRelease(chart, values, status)
		rel.Labels = maps.Clone(labels)
		*rel = *mark.Labelled(rel)
		return rel
	}
	if f.renderFails {
		// Helm returns its in-memory release, which never reached storage.
		err := f.renderErr
		if err == nil {
			err = errors.New(`template: app/templates/broken.yaml:1: error calling fail: broken`)
		}
		return &releasev1.Release{Name: f.name, Namespace: f.namespace, Version: len(f.releases) + 1, Chart: chart,
			Info: &releasev1.Info{Status: common.StatusFailed}}, err
	}
	if err := f.fail[action]; err != nil {
		if f.unrecorded && (action == "install" || action == "upgrade") {
			pending := common.StatusPendingInstall
			if action == "upgrade" {
				pending = common.StatusPendingUpgrade
			}
			// Helm returns its in-memory release, failed; storage has it
			// pending.
			stored := store(pending)
			failed := *stored
			failed.Info = &releasev1.Info{Status: common.StatusFailed}
			return &failed, err
		}
		return store(common.StatusFailed), err
	}
	if action == f.interrupt {
		status := common.StatusPendingInstall
		if action == "upgrade" {
			status = common.StatusPendingUpgrade
		}
		store(status).Info.Description = awaitingMarker(f.now.Add(time.Hour))
		f.shutdown()
		return nil, context.Canceled
	}
	for _, r := range f.releases {
		if r.Info.Status == common.StatusDeployed {
			r.Info.Status = common.StatusSuperseded
		}
	}
	return store(common.StatusDeployed), nil
}

func (f *fakeHelm) Install(_ context.Context, chart *chartv2.Chart, values map[string]any, mark ownrevision.Mark) (*releasev1.Release, error) {
	return f.deploy("install", chart, values, nil, mark)
}

// Upgrade carries the latest revision's labels over, as Helm merges them
// into the new revision.
func (f *fakeHelm) Upgrade(_ context.Context, chart *chartv2.Chart, values map[string]any, mark ownrevision.Mark) (*releasev1.Release, error) {
	var labels map[string]string
	if last := f.last(); last != nil {
		labels = last.Labels
	}
	return f.deploy("upgrade", chart, values, labels, mark)
}

func (f *fakeHelm) Test(context.Context) (*releasev1.Release, error) {
	f.calls = append(f.calls, "test")
	rel := f.last()
	phase := releasev1.HookPhaseSucceeded
	if f.testFails {
		phase = releasev1.HookPhaseFailed
	}
	rel.Hooks = []*releasev1.Hook{{Name: "smoke", Kind: "Pod", Events: []releasev1.HookEvent{releasev1.HookTest},
		LastRun: releasev1.HookExecution{StartedAt: f.now, CompletedAt: f.now, Phase: phase}}}
	f.written = rel
	if f.testFails {
		return rel, errors.New("pod smoke failed")
	}
	return rel, nil
}

func (f *fakeHelm) Rollback(_ context.Context, toVersion int, mark ownrevision.Mark) error {
	f.calls = append(f.calls, "rollback")
	if f.onRollback != nil {
		f.onRollback()
	}
	if err := f.fail["rollback"]; err != nil {
		return err
	}
	for _, r := range f.releases {
		if r.Version == toVersion {
			// As Helm's rollback: the target's labels, and its number in
			// the description and the record.
			rel, err := f.deploy("(rollback)", r.Chart, r.Config, r.Labels, mark)
			f.calls = f.calls[:len(f.calls)-1]
			if rel != nil {
				rel.Info.Description = fmt.Sprintf("Rollback to %d", toVersion)
				rel.Info.RollbackRevision = toVersion
			}
			return err
		}
	}
	return errors.New("no such version")
}

func (f *fakeHelm) Uninstall(context.Context) error {
	f.calls = append(f.calls, "uninstall")
	if f.onUninstall != nil {
		f.onUninstall()
	}
	if err := f.fail["uninstall"]; err != nil {
		return err
	}
	f.releases = nil
	f.written = nil
	return nil
}

// ResumeWait finishes a pending revision: deployed, or failed when
// fail["resume"] is set, superseding earlier deployed revisions like Helm.
func (f *fakeHelm) ResumeWait(_ context.Context, rel *releasev1.Release) (*releasev1.Release, error) {
	f.calls = append(f.calls, "resume")
	if f.interrupt == "resume" {
		f.shutdown()
		return nil, context.Canceled
	}
	if err := f.fail["resume-transient"]; err != nil {
		// Storage or the API failed around the wait: no outcome recorded,
		// the revision is still pending.
		return nil, err
	}
	if err := f.fail["resume"]; err != nil {
		rel.Info.Status = common.StatusFailed
		f.written = rel
		return rel, err
	}
	for _, r := range f.releases {
		if r != rel && r.Info.Status == common.StatusDeployed {
			r.Info.Status = common.StatusSuperseded
		}
	}
	rel.Info.Status = common.StatusDeployed
	f.written = rel
	return rel, nil
}

func (f *fakeHelm) Unlock(_ context.Context, rel *releasev1.Release) error {
	f.calls = append(f.calls, "unlock")
	rel.Info.Status = common.StatusFailed
	f.written = rel
	return nil
}

// fakeChart is a Chart whose Load counts calls.
type fakeChart struct {
	md    *chartv2.Metadata
	loads int
}

func newFakeChart(name, version string) *fakeChart {
	return &fakeChart{md: &chartv2.Metadata{APIVersion: "v2", Name: name, Version: version}}
}

func (c *fakeChart) Metadata() *chartv2.Metadata { return c.md }
func (c *fakeChart) Load() (*chartv2.Chart, error) {
	c.loads++
	md := *c.md
	return &chartv2.Chart{Metadata: &md}, nil
}

// recordedEvent is one event the machine emitted.
type recordedEvent struct {
	Type, Reason, Message, Action string
	Meta                          map[string]string
}

type fakeRecorder struct{ events []recordedEvent }

func (r *fakeRecorder) AnnotatedEventf(_, _ runtime.Object, meta map[string]string, eventtype, reason, action, messageFmt string, args ...any) {
	r.events = append(r.events, recordedEvent{Type: eventtype, Reason: reason, Message: sprintf(messageFmt, args...), Action: action, Meta: meta})
}

// DetectDrift reports the next prepared drift set.
func (f *fakeHelm) DetectDrift(_ context.Context, rel *releasev1.Release) (jsondiff.DiffSet, error) {
	f.calls = append(f.calls, "detect")
	var set jsondiff.DiffSet
	if len(f.drift) > 0 {
		set = f.drift[0]
		if len(f.drift) > 1 {
			f.drift = f.drift[1:]
		}
	}
	return set, f.detectErr
}

// CorrectDrift "applies" every drifted object of set.
func (f *fakeHelm) CorrectDrift(_ context.Context, set jsondiff.DiffSet) (*ssa.ChangeSet, error) {
	f.calls = append(f.calls, "correct")
	changes := ssa.NewChangeSet()
	for _, d := range set {
		if d.Type == jsondiff.DiffTypeCreate || d.Type == jsondiff.DiffTypeUpdate {
			changes.Add(ssa.ChangeSetEntry{Subject: d.GroupVersionKind().Kind + "/" + d.GetNamespace() + "/" + d.GetName(), Action: ssa.ConfiguredAction})
		}
	}
	if f.correctErr != nil {
		return ssa.NewChangeSet(), f.correctErr
	}
	return changes, nil
}

// supersedeDeployed marks every deployed revision superseded, as Helm does
// before it stores a new deployed one.
func (f *fakeHelm) supersedeDeployed() {
	for _, r := range f.releases {
		if r.Info.Status == common.StatusDeployed {
			r.Info.Status = common.StatusSuperseded
		}
	}
}

// upgradeByHand stores a revision the way `helm upgrade` run by hand does:
// the chart and values given, the labels of the latest revision copied
// into the new one (Helm merges them, pkg/action/upgrade.go), and nothing
// of the controller's.
func (f *fakeHelm) upgradeByHand(chart *chartv2.Chart, values map[string]any) *releasev1.Release {
	labels := maps.Clone(f.last().Labels)
	f.supersedeDeployed()
	rel := f.newRelease(chart, values, common.StatusDeployed)
	rel.Labels = labels
	rel.Info.Description = "Upgrade complete"
	return rel
}

// rollbackByHand stores a revision the way `helm rollback <release>
// <version>` run by hand does: the chart, values and labels of the revision
// rolled back to, described "Rollback to N".
func (f *fakeHelm) rollbackByHand(version int) *releasev1.Release {
	var target *releasev1.Release
	for _, r := range f.releases {
		if r.Version == version {
			target = r
		}
	}
	f.supersedeDeployed()
	rel := f.newRelease(target.Chart, target.Config, common.StatusDeployed)
	rel.Labels = maps.Clone(target.Labels)
	rel.Info.Description = fmt.Sprintf("Rollback to %d", version)
	rel.Info.RollbackRevision = version
	return rel
}
