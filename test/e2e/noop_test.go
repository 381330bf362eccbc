package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	"github.com/fluxcd/pkg/runtime/conditions"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v2 "github.com/afterhooks/helm-controller/api/v2"
	"github.com/afterhooks/helm-controller/test/e2e/framework"
)

// TestNoOpReconcileWritesOnce: a reconcile of a release in sync, asked for
// with reconcile.fluxcd.io/requestedAt, writes the HelmRelease once, to
// record the token, and is Ready all along; a release in sync reconciled
// at its interval writes nothing (issue 32).
func TestNoOpReconcileWritesOnce(t *testing.T) {
	ns := env.Namespace(t)
	repo := env.HelmRepository(t, ns)
	hr := env.PodinfoRelease(ns, "noop", repo.Name, "")
	hr.Spec.Interval.Duration = 10 * time.Second
	env.Create(t, hr)
	env.WaitRelease(t, hr, framework.ReleaseWant{Reason: helmv2.InstallSucceededReason, Version: 1})

	framework.Step(t, "interval reconciles write nothing", func(t *testing.T) {
		// Two intervals, jittered by at most 5 %.
		writes := watchWrites(t, hr, 25*time.Second, func() {})
		if len(writes) != 0 {
			t.Errorf("the HelmRelease was written %d times at rest:\n%s", len(writes), describeWrites(writes))
		}
	})
	framework.Step(t, "a requested reconcile writes once", func(t *testing.T) {
		var token string
		writes := watchWrites(t, hr, 5*time.Second, func() {
			token = env.RequestReconcile(t, hr)
			env.WaitReconcileHandled(t, hr, token, time.Minute)
		})
		// The request itself, and the status write that records it.
		if len(writes) != 2 || writes[1].Status.LastHandledReconcileAt != token {
			t.Fatalf("writes after the request, want the annotation and one status write:\n%s", describeWrites(writes))
		}
		for _, w := range writes {
			if !conditions.IsReady(w) || conditions.IsReconciling(w) {
				t.Errorf("a write during a no-op left %s", framework.Conditions(w))
			}
		}
		if got := hr.Status.History.Latest().Version; got != 1 {
			t.Errorf("history's latest version %d, want 1: nothing to do", got)
		}
	})
}

// TestReleaseChangedBehindTheControllersBack: a helm upgrade, then a helm
// rollback, by hand after the controller read (and cached) the release:
// each time the next reconcile sees the new revision and, as upstream does
// for a release its history does not record, upgrades it back to the
// desired values.
func TestReleaseChangedBehindTheControllersBack(t *testing.T) {
	ns := env.Namespace(t)
	repo := env.HelmRepository(t, ns)
	hr := env.PodinfoRelease(ns, "behind", repo.Name, `{"replicaCount":1}`)
	env.Create(t, hr)
	env.WaitRelease(t, hr, framework.ReleaseWant{Reason: helmv2.InstallSucceededReason, Version: 1})
	// A no-op reconcile first, so the controller holds revision 1.
	env.WaitReconcileHandled(t, hr, env.RequestReconcile(t, hr), time.Minute)

	if err := env.Get(context.Background(), repo, ns, repo.Name); err != nil {
		t.Fatal(err)
	}
	helm, chart := helmCLI(t, ns, repo.Spec.URL)
	helm(t, "upgrade", hr.Name, chart, "--reuse-values", "--set", "replicaCount=2", "--force-conflicts")
	env.WantStorage(t, ns, hr.Name, "superseded", "deployed")

	env.WaitReconcileHandled(t, hr, env.RequestReconcile(t, hr), 2*time.Minute)
	env.WaitRelease(t, hr, framework.ReleaseWant{Reason: helmv2.UpgradeSucceededReason, Version: 3})
	stored := env.Storage(t, ns, hr.Name)
	newest := stored[len(stored)-1]
	if newest.Release.Version != 3 || newest.Release.Config["replicaCount"] != float64(1) {
		t.Errorf("newest revision %d with values %v, want 3 with the desired replicaCount 1", newest.Release.Version, newest.Release.Config)
	}

	// A rollback by hand of the healthy release is no remediation of the
	// controller's: it is upgraded over as well, as upstream does.
	helm(t, "rollback", hr.Name, "1", "--force-conflicts")
	env.WantStorage(t, ns, hr.Name, "superseded", "superseded", "superseded", "deployed")
	env.WaitReconcileHandled(t, hr, env.RequestReconcile(t, hr), 2*time.Minute)
	env.WaitRelease(t, hr, framework.ReleaseWant{Reason: helmv2.UpgradeSucceededReason, Version: 5})
	stored = env.Storage(t, ns, hr.Name)
	newest = stored[len(stored)-1]
	if newest.Release.Version != 5 || newest.Release.Config["replicaCount"] != float64(1) {
		t.Errorf("newest revision %d with values %v, want 5 with the desired replicaCount 1", newest.Release.Version, newest.Release.Config)
	}
}

// watchWrites returns the versions of hr written while during runs and
// for settle after it, oldest first.
func watchWrites(t *testing.T, hr *v2.HelmRelease, settle time.Duration, during func()) []*v2.HelmRelease {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	wc, err := client.NewWithWatch(env.Cluster.RESTConfig(), client.Options{Scheme: env.Client.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	current := &v2.HelmRelease{}
	if err := env.Get(ctx, current, hr.Namespace, hr.Name); err != nil {
		t.Fatal(err)
	}
	w, err := wc.Watch(ctx, &v2.HelmReleaseList{}, &client.ListOptions{
		Namespace:     hr.Namespace,
		FieldSelector: fields.OneTermEqualSelector("metadata.name", hr.Name),
		Raw:           &metav1.ListOptions{ResourceVersion: current.ResourceVersion},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	got := make(chan []*v2.HelmRelease)
	go func() {
		var writes []*v2.HelmRelease
		for ev := range w.ResultChan() {
			if obj, ok := ev.Object.(*v2.HelmRelease); ok && ev.Type == watch.Modified {
				writes = append(writes, obj)
			}
		}
		got <- writes
	}()
	during()
	time.Sleep(settle)
	w.Stop()
	return <-got
}

func describeWrites(writes []*v2.HelmRelease) string {
	var b strings.Builder
	for _, w := range writes {
		fmt.Fprintf(&b, "  resourceVersion %s, lastHandledReconcileAt %q, %s\n", w.ResourceVersion, w.Status.LastHandledReconcileAt, framework.Conditions(w))
	}
	return b.String()
}
