package reliability

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"

	v2 "github.com/afterhooks/helm-controller/api/v2"
	"github.com/afterhooks/helm-controller/test/e2e/framework"
)

// shardCount is how many shard controllers TestShardKill runs.
const shardCount = 4

// TestShardKill runs Flux's sharding as users deploy it: four controllers,
// each started with --watch-label-selector on sharding.fluxcd.io/key and
// leader election on (a Lease each), each with releases of its own (2 per
// shard; 25 with RELIABILITY=full). One shard is killed with SIGKILL and
// the values of every release change: the other shards upgrade theirs
// while the killed shard's releases wait untouched at revision 1; once it
// is started again it upgrades them. Every release ends Ready at revision
// 2 with exactly revisions 1 and 2 in its history and storage, and no
// controller's log names a release of another shard.
func TestShardKill(t *testing.T) {
	t.Parallel()
	perShard := 2
	if full {
		perShard = 25
	}
	f := newShardFleet(t, perShard)
	r := row{Section: "Shards", Case: fmt.Sprintf("%d shards × %d releases, one shard killed (SIGKILL) while every release changes", shardCount, perShard), Runs: shardCount * perShard}
	// Broken invariants are reported at once, so that a later fatal step
	// does not hide them.
	broke := func(failures []string) {
		r.Failures = append(r.Failures, failures...)
		for _, failure := range failures {
			t.Error(failure)
		}
	}

	start := time.Now()
	f.waitAll(t, 1, f.all())
	installed := time.Since(start)

	killed := f.shards[shardCount-1]
	if err := killed.Kill(); err != nil {
		t.Fatalf("killing shard %s: %v", killed.Options().Shard, err)
	}
	for _, hr := range f.all() {
		env.PatchSpec(t, hr, func(hr *v2.HelmRelease) {
			hr.Spec.Values = framework.JSON(`{"podAnnotations":{"shards.afterhooks.io/round":"2"}}`)
		})
	}
	start = time.Now()
	f.waitAll(t, 2, f.others(killed))
	othersUpgraded := time.Since(start)
	broke(f.untouchedWhileDown(t, killed))

	framework.Restart(t, killed)
	start = time.Now()
	f.waitAll(t, 2, f.releases[killed.Options().Shard])
	resumed := time.Since(start)

	broke(f.revisionsOneAndTwo(t))
	broke(f.eachShardOnlyItsOwn())
	r.Note = fmt.Sprintf("installed in %s; the other shards upgraded in %s with one down; the killed shard's releases upgraded %s after its restart (its Lease had to expire)",
		installed.Round(time.Second), othersUpgraded.Round(time.Second), resumed.Round(time.Second))
	report.add(r)
	t.Log(r.Note)
}

// shardFleet is the shard controllers of one namespace and their releases.
type shardFleet struct {
	ns     string
	shards []*framework.Controller
	// releases maps a shard's name to its HelmReleases.
	releases map[string][]*v2.HelmRelease
}

// newShardFleet starts the shard controllers and creates perShard podinfo
// releases labelled for each.
func newShardFleet(t *testing.T, perShard int) *shardFleet {
	ns := env.Namespace(t)
	repo := env.HelmRepository(t, ns)
	f := &shardFleet{ns: ns, releases: map[string][]*v2.HelmRelease{}}
	for i := range shardCount {
		c := env.StartShard(t, ns, framework.ControllerOptions{Shard: fmt.Sprintf("kill-%d-%s", i, ns), LeaderElection: true})
		framework.LogsOnFailure(t, c)
		// A shard left stopped by a failed step comes back to uninstall.
		t.Cleanup(func() {
			if c.Running() != nil {
				framework.Restart(t, c)
			}
		})
		f.shards = append(f.shards, c)
		for j := range perShard {
			hr := framework.Sharded(env.PodinfoRelease(ns, fmt.Sprintf("s%d-app-%d", i, j), repo.Name, ""), c)
			env.Create(t, hr)
			f.releases[c.Options().Shard] = append(f.releases[c.Options().Shard], hr)
		}
	}
	return f
}

// all is every release of the fleet.
func (f *shardFleet) all() []*v2.HelmRelease {
	var all []*v2.HelmRelease
	for _, c := range f.shards {
		all = append(all, f.releases[c.Options().Shard]...)
	}
	return all
}

// others is the releases of every shard but c.
func (f *shardFleet) others(c *framework.Controller) []*v2.HelmRelease {
	return slices.DeleteFunc(f.all(), func(hr *v2.HelmRelease) bool {
		return hr.Labels[framework.ShardLabel] == c.Options().Shard
	})
}

// waitAll waits, side by side, for each release to be Ready at revision
// version. A killed shard's Lease outlives it by its lease duration, so
// the wait allows a few minutes.
func (f *shardFleet) waitAll(t *testing.T, version int, releases []*v2.HelmRelease) {
	t.Helper()
	reason := helmv2.InstallSucceededReason
	if version > 1 {
		reason = helmv2.UpgradeSucceededReason
	}
	var wg sync.WaitGroup
	for _, hr := range releases {
		wg.Go(func() {
			env.WaitRelease(t, hr, framework.ReleaseWant{Reason: reason, Version: version, Timeout: 4 * time.Minute})
		})
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
}

// untouchedWhileDown checks, for ten seconds after the other shards have
// upgraded, that no release of the killed shard moves: its new generation
// is not observed and its history stays at revision 1.
func (f *shardFleet) untouchedWhileDown(t *testing.T, killed *framework.Controller) []string {
	var failures []string
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		for _, hr := range f.releases[killed.Options().Shard] {
			got := &v2.HelmRelease{}
			if err := env.Get(context.Background(), got, hr.Namespace, hr.Name); err != nil {
				return append(failures, fmt.Sprintf("reading %s: %v", hr.Name, err))
			}
			latest := got.Status.History.Latest()
			if got.Status.ObservedGeneration == got.Generation || latest == nil || latest.Version != 1 {
				return append(failures, fmt.Sprintf("%s moved while its shard was down: observed generation %d of %d, history %s",
					hr.Name, got.Status.ObservedGeneration, got.Generation, framework.Snapshots(got.Status.History)))
			}
		}
		time.Sleep(framework.PollInterval)
	}
	return failures
}

// revisionsOneAndTwo checks that every release went through exactly one
// install and one upgrade: history and Helm storage hold revisions 1 and
// 2, and 2 is deployed.
func (f *shardFleet) revisionsOneAndTwo(t *testing.T) []string {
	var failures []string
	for _, hr := range f.all() {
		got := &v2.HelmRelease{}
		if err := env.Get(context.Background(), got, hr.Namespace, hr.Name); err != nil {
			failures = append(failures, fmt.Sprintf("reading %s: %v", hr.Name, err))
			continue
		}
		var history []string
		for _, s := range got.Status.History {
			history = append(history, fmt.Sprintf("v%d %s", s.Version, s.Status))
		}
		if h := strings.Join(history, ", "); h != "v2 deployed, v1 superseded" {
			failures = append(failures, fmt.Sprintf("%s history [%s], want [v2 deployed, v1 superseded]", hr.Name, h))
		}
		var storage []string
		for _, s := range env.Storage(t, hr.Namespace, hr.Name) {
			storage = append(storage, fmt.Sprintf("v%d %s", s.Release.Version, s.Status()))
		}
		if st := strings.Join(storage, ", "); st != "v1 superseded, v2 deployed" {
			failures = append(failures, fmt.Sprintf("%s storage [%s], want [v1 superseded, v2 deployed]", hr.Name, st))
		}
	}
	return failures
}

// eachShardOnlyItsOwn checks that every shard's log, across its
// processes, names its own releases and none of another shard's.
func (f *shardFleet) eachShardOnlyItsOwn() []string {
	var failures []string
	for _, c := range f.shards {
		log, err := c.Log()
		if err != nil {
			failures = append(failures, fmt.Sprintf("reading the log of shard %s: %v", c.Options().Shard, err))
			continue
		}
		for _, hr := range f.all() {
			own := hr.Labels[framework.ShardLabel] == c.Options().Shard
			if named := strings.Contains(log, `"name":"`+hr.Name+`"`); named != own {
				failures = append(failures, fmt.Sprintf("the log of shard %s names %s: %v, want %v", c.Options().Shard, hr.Name, named, own))
			}
		}
	}
	return failures
}
