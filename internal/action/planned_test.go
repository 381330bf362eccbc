package action

import (
	"context"
	"testing"
	"time"

	"github.com/fluxcd/cli-utils/pkg/kstatus/polling/engine"
	helmaction "helm.sh/helm/v4/pkg/action"
	"helm.sh/helm/v4/pkg/postrenderer"
	releasev1 "helm.sh/helm/v4/pkg/release/v1"

	v2 "github.com/afterhooks/helm-controller/api/v2"
	"github.com/afterhooks/helm-controller/internal/afterhooks"
	"github.com/afterhooks/helm-controller/internal/plan"
	"github.com/afterhooks/helm-controller/internal/recreate"
	"github.com/afterhooks/helm-controller/internal/sequencing"
)

// asked is what a test asks of one action, where the runner would decide
// it in production.
type asked struct {
	config        Config
	hookOrder     v2.HookWaitStrategy // the default hook order
	postRenderer  postrenderer.PostRenderer
	waitContext   context.Context
	statusReaders []engine.StatusReader
	observer      Observer
	// toVersion is the revision a rollback goes back to.
	toVersion int
}

// planned is the call of obj's action v as the runner would plan it,
// reading from cfg the revision an upgrade starts from and the one a
// rollback or uninstall follows.
func planned(t *testing.T, cfg *helmaction.Configuration, obj *v2.HelmRelease, v plan.Verb, a asked) Call {
	t.Helper()
	if obj == nil {
		return Call{Config: a.config, Plan: plan.Plan{Verb: v}, Observer: a.observer}
	}
	name := v2.ReleaseName(obj)
	p := plan.New(obj, v, plan.Settings{Release: name, DefaultHookOrder: a.hookOrder, Helm3Defaults: a.config.UseHelm3Defaults,
		HookMarks: HookMarks(obj), Recreate: &recreate.Policy{Gate: a.config.RecreateImmutable,
			Release: recreate.Release{Name: name, Namespace: obj.GetReleaseNamespace()}}})
	p.PostRenderer, p.WaitContext, p.StatusReaders = a.postRenderer, a.waitContext, a.statusReaders
	var followed *releasev1.Release
	switch {
	case cfg == nil:
	case v == plan.Upgrade:
		if last, err := LastRelease(cfg, name); err == nil {
			p = p.Upgrading(last)
		}
	case v == plan.Rollback:
		followed, _ = RollbackTarget(cfg, name, a.toVersion)
		if from, err := LastRelease(cfg, name); err == nil {
			p.RolledBackFrom = recreate.ConsentsOf(from.Manifest)
		}
	case v == plan.Uninstall:
		followed, _ = LastRelease(cfg, name)
	}
	p, err := p.Follow(followed)
	if err != nil {
		t.Fatal(err)
	}
	return Call{Config: a.config, Plan: p, Observer: a.observer}
}

// hearing is an Observer of func fields, each may be nil.
type hearing struct {
	afterhooks.Observer
	sequence      func(sequencing.Progress)
	recreated     func(recreate.Recreated)
	hookResources func(deleted, left []string)
}

func (h hearing) Started(v plan.Verb) {
	if h.Observer != nil {
		h.Observer.Started(v)
	}
}

func (h hearing) HookStarted(p afterhooks.HookProgress) {
	if h.Observer != nil {
		h.Observer.HookStarted(p)
	}
}

func (h hearing) Waiting(v plan.Verb, rel *releasev1.Release, timeout time.Duration, resumed bool) {
	if h.Observer != nil {
		h.Observer.Waiting(v, rel, timeout, resumed)
	}
}

func (h hearing) PhaseDone(v plan.Verb, phase string, took time.Duration) {
	if h.Observer != nil {
		h.Observer.PhaseDone(v, phase, took)
	}
}

func (h hearing) Sequence(p sequencing.Progress) {
	if h.sequence != nil {
		h.sequence(p)
	}
}

func (h hearing) SequenceWarning(string)             {}
func (h hearing) SequencePlanned(sequencing.Planned) {}

func (h hearing) Recreated(r recreate.Recreated) {
	if h.recreated != nil {
		h.recreated(r)
	}
}

func (h hearing) HookResources(deleted, left []string) {
	if h.hookResources != nil {
		h.hookResources(deleted, left)
	}
}
