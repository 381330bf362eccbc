package reliability

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilrand "k8s.io/apimachinery/pkg/util/rand"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v2 "github.com/afterhooks/helm-controller/api/v2"
	"github.com/afterhooks/helm-controller/test/chartserver"
	"github.com/afterhooks/helm-controller/test/e2e/framework"
)

// Settings of the remote cluster trials.
const (
	// remoteOutage is how long the remote cluster stays unreachable.
	remoteOutage = 30 * time.Second
	// remoteAppDelay is how long the application takes to become ready:
	// the outage starts in the readiness wait, and the application becomes
	// ready while the cluster is unreachable.
	remoteAppDelay  = 10 * time.Second
	remoteHookDelay = time.Second
	// remoteTimeout is the action timeout: the wait outlasts the outage
	// and what the controller needs to find the cluster again.
	remoteTimeout = 3 * time.Minute
	// remoteStrikeWindow is how far into the wait the outage starts, at
	// most.
	remoteStrikeWindow = 2 * time.Second
)

// remoteExpiringTimeout is the action timeout of the trials whose wait
// times out during the outage.
const remoteExpiringTimeout = 20 * time.Second

// remoteCell is one kind of remote cluster trial.
type remoteCell struct {
	action   string // install, upgrade
	strategy v2.HookWaitStrategy
	// timeout is the action timeout, remoteTimeout when zero.
	timeout time.Duration
}

func (c remoteCell) String() string {
	s := fmt.Sprintf("%s, %s, %s: remote cluster unreachable %d s", c.action, c.strategy, phaseWait, int(remoteOutage.Seconds()))
	if c.expires() {
		s += fmt.Sprintf(", action timeout %d s expires during it", int(c.timeout.Seconds()))
	}
	return s
}

// expires tells whether the action's timeout expires during the outage.
func (c remoteCell) expires() bool { return c.timeout > 0 && c.timeout < remoteOutage }

func (c remoteCell) actionTimeout() time.Duration {
	if c.timeout > 0 {
		return c.timeout
	}
	return remoteTimeout
}

// remoteCells: the install and the upgrade under both strategies, with a
// timeout the wait outlasts the outage with; and, to document what a
// user sees when the timeout is shorter than the outage, the afterHooks
// install and upgrade (full suite: both strategies) with a timeout that
// expires during it.
func remoteCells() []remoteCell {
	var out []remoteCell
	for _, a := range []string{"install", "upgrade"} {
		for _, s := range []v2.HookWaitStrategy{v2.AfterHooks, v2.BeforeHooks} {
			out = append(out, remoteCell{action: a, strategy: s})
		}
	}
	for _, a := range []string{"install", "upgrade"} {
		for _, s := range []v2.HookWaitStrategy{v2.AfterHooks, v2.BeforeHooks} {
			if full || s == v2.AfterHooks {
				out = append(out, remoteCell{action: a, strategy: s, timeout: remoteExpiringTimeout})
			}
		}
	}
	return out
}

func remoteRuns() int {
	if full {
		return 2
	}
	return 1
}

// TestFaultsRemoteOutage makes the cluster a HelmRelease deploys to through
// spec.kubeConfig unreachable for 30 s in the middle of the readiness wait
// of an install and of an upgrade, under both wait strategies: the
// controller reaches the second cluster through a framework.Proxy whose
// outage cuts every connection open (the wait's lists and watches among
// them) and resets every new one. The invariants of TestFaults hold: no
// release left pending or stuck; no revision lost; no hook run again once
// the readiness wait began; no remediation or uninstall caused by the
// outage; Ready true only when the application on the remote cluster is
// ready; failure counters as without the outage. The action timeout is
// long enough for the wait to outlast the outage, so the release must end
// deployed and Ready, with no extra revision.
//
// Further cells give the action a timeout that expires during the outage,
// to pin down what a user then sees (see checkExpired).
func TestFaultsRemoteOutage(t *testing.T) {
	remote := env.StartRemote(t, "remote")
	ns := env.Namespace(t)
	remote.Namespace(t, ns)
	ref := env.PublishChart(t, faultChart, "0.4.0", ns)
	repo := env.HelmRepository(t, ns)
	ctl, err := framework.StartController(framework.ControllerOptions{
		Binary: env.Binary, Kubeconfig: env.Cluster.Kubeconfig(), LogDir: t.TempDir(),
		Shard: "remote-" + utilrand.String(4),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer cleanupShard(ctl, ns)

	seed := trialSeed(t, "outage moments")
	all := selectCells(remoteCells())
	trials := make([]*remoteTrials, len(all))
	for i, c := range all {
		// Every cell has a proxy of its own: an outage takes down one
		// release's cluster access, not its neighbours'.
		proxy := framework.StartProxyTo(t, remote.Cluster.RESTConfig())
		secret := fmt.Sprintf("remote-%d", i)
		env.KubeconfigSecret(t, ns, secret, proxy.Kubeconfig)
		tr := &remoteTrials{cell: c, ns: ns, repo: repo.Name, chart: ref, prefix: fmt.Sprintf("c%d-", i),
			secret: secret, proxy: proxy, remote: remote, ctl: ctl, rand: rand.New(rand.NewPCG(seed, uint64(i)))}
		trials[i] = tr
	}
	// Every cell at once: they share one controller, and an outage is of
	// one cell's proxy only.
	runTrials(t, all, len(all), func(i int, _ remoteCell) row { return trials[i].runCell(t) })
	if t.Failed() {
		var b strings.Builder
		ctl.DumpLogs(&b, 120)
		t.Log(b.String())
	}
}

// remoteTrials runs the trials of one cell.
type remoteTrials struct {
	cell   remoteCell
	ns     string
	repo   string
	chart  chartserver.ChartRef
	prefix string
	secret string
	proxy  *framework.Proxy
	remote *framework.Remote
	ctl    *framework.Controller
	rand   *rand.Rand
	// app is the release the upgrades upgrade.
	app *v2.HelmRelease
}

func (tr *remoteTrials) release(name, values string) *v2.HelmRelease {
	hr := framework.Release(tr.ns, tr.prefix+name, tr.repo, tr.chart.Name, tr.chart.Version, values)
	framework.Targeting(framework.Sharded(hr, tr.ctl), tr.secret)
	unlimited := 0
	hr.Spec.MaxHistory = &unlimited
	hr.Spec.Timeout = &metav1.Duration{Duration: tr.cell.actionTimeout()}
	// Retries, so that an outage wrongly counted as a failure shows as a
	// remediation.
	hr.Spec.Install = &v2.Install{Install: helmv2.Install{Remediation: &helmv2.InstallRemediation{Retries: 3}}, WaitStrategy: tr.cell.strategy}
	hr.Spec.Upgrade = &v2.Upgrade{Upgrade: helmv2.Upgrade{Remediation: &helmv2.UpgradeRemediation{Retries: 3}}, WaitStrategy: tr.cell.strategy}
	return hr
}

// remoteOutcome is what one run saw.
type remoteOutcome struct {
	broken []string
	// intoWait is how far into the readiness wait the outage started.
	intoWait time.Duration
	// readyAfter is from the end of the outage to Ready.
	readyAfter time.Duration
	// refused and resets count the requests refused and the connections
	// reset during the outage.
	refused, resets int
	// during are the Ready and Reconciling states seen during the outage.
	during []string
	// cut counts the requests in flight the outage cut.
	cut int
	// storage, counters, events and remediations describe the end.
	storage, counters, events string
	remediations              int
}

func (tr *remoteTrials) runCell(t *testing.T) row {
	r := row{Section: "Faults", Case: tr.cell.String()}
	if tr.cell.action == "upgrade" {
		tr.app = tr.release("app", phaseValues("v0", remoteHookDelay, time.Second))
		if err := env.Client.Create(context.Background(), tr.app); err != nil {
			r.Runs, r.Failures = 1, append(r.Failures, "set-up: "+err.Error())
			return r
		}
		if _, err := tr.awaitReady(tr.app.Name, helmv2.InstallSucceededReason, 1, nil); err != nil {
			r.Runs, r.Failures = 1, append(r.Failures, "set-up: first install: "+err.Error())
			return r
		}
	}
	var outs []remoteOutcome
	for run := range remoteRuns() {
		r.Runs++
		out := tr.runOnce(run)
		if len(out.broken) > 0 {
			// One entry per failed run, as the table counts them.
			r.Failures = append(r.Failures, fmt.Sprintf("run %d: %s", run+1, strings.Join(out.broken, "; ")))
		}
		outs = append(outs, out)
	}
	r.Note = summarizeRemote(tr.cell, outs)
	return r
}

// remoteObserved is what the proxy saw during a run.
type remoteObserved struct {
	mu         sync.Mutex
	waitBegan  time.Time
	hookWrites map[string][]time.Time
	struck     chan struct{}
	strikeOnce sync.Once
	strikeAt   time.Time
	// atStrike is the remote Helm storage when the outage began.
	atStrike []framework.Stored
}

func (tr *remoteTrials) runOnce(run int) remoteOutcome {
	var out remoteOutcome
	ctx := context.Background()
	tag := fmt.Sprintf("r%d", run+1)
	values := phaseValues(tag, remoteHookDelay, remoteAppDelay)
	hr, version, reason := tr.release(tag, values), 1, helmv2.InstallSucceededReason
	if tr.cell.action == "upgrade" {
		hr, version, reason = tr.app, run+2, helmv2.UpgradeSucceededReason
	}
	if tr.cell.expires() {
		// Remediation and retries decide the revision.
		version = 0
	}
	name := hr.Name
	before, err := env.ReadStorage(ctx, tr.remote.Client, tr.ns, name)
	if err != nil {
		out.broken = append(out.broken, err.Error())
		return out
	}
	remBefore := remediationEvents(tr.ns, name)
	refusedBefore, resetsBefore := tr.proxy.Refused()
	cutBefore := len(tr.proxy.Cut())
	eventsBefore := eventCounts(tr.ns, name)

	obs := &remoteObserved{hookWrites: map[string][]time.Time{}, struck: make(chan struct{})}
	stop := tr.proxy.Observe(func(r *http.Request) { tr.watch(r, name, obs) })
	defer stop()

	if tr.cell.action == "install" {
		err = env.Client.Create(ctx, hr)
	} else {
		err = tr.patchValues(hr, values)
	}
	if err != nil {
		out.broken = append(out.broken, "starting the action: "+err.Error())
		return out
	}
	select {
	case <-obs.struck:
	case <-time.After(3 * time.Minute):
		out.broken = append(out.broken, "the readiness wait was never reached within 3m (no outage)")
		return out
	}
	out.cut = len(tr.proxy.Cut()) - cutBefore
	obs.mu.Lock()
	out.intoWait = obs.strikeAt.Sub(obs.waitBegan)
	outageEnd := obs.strikeAt.Add(remoteOutage)
	atStrike := obs.atStrike
	obs.mu.Unlock()

	end, err := tr.awaitReady(name, reason, version, func(cur *v2.HelmRelease) {
		if tr.proxy.Down() {
			state := conditionOf(cur)
			if c := conditions.Get(cur, meta.ReconcilingCondition); c != nil && c.Status == metav1.ConditionTrue {
				state += fmt.Sprintf(" (Reconciling: %s)", shorten(c.Message, 60))
			}
			if !slices.Contains(out.during, state) {
				out.during = append(out.during, state)
			}
		}
		if lie := tr.readyLie(cur); lie != "" && !slices.Contains(out.broken, lie) {
			out.broken = append(out.broken, lie)
		}
	})
	if err != nil {
		out.broken = append(out.broken, "stuck: "+err.Error())
		return out
	}
	out.readyAfter = time.Since(outageEnd)
	if tr.proxy.Down() {
		out.broken = append(out.broken, "Ready while the remote cluster is unreachable")
	}
	refused, resets := tr.proxy.Refused()
	out.refused, out.resets = len(refused)-len(refusedBefore), resets-resetsBefore

	// No revision lost, no gap, no extra revision.
	stored, err := env.ReadStorage(ctx, tr.remote.Client, tr.ns, name)
	if err != nil {
		out.broken = append(out.broken, err.Error())
		return out
	}
	have := map[int]bool{}
	for i, s := range stored {
		have[s.Release.Version] = true
		if s.Release.Version != i+1 {
			out.broken = append(out.broken, "history has a gap: "+framework.Describe(stored))
		}
	}
	out.storage = framework.Describe(stored)
	for _, s := range atStrike {
		// A failed install remediated by uninstalling takes its history
		// with it, as Helm's uninstall does.
		if !have[s.Release.Version] && !(tr.cell.expires() && tr.cell.action == "install") {
			out.broken = append(out.broken, fmt.Sprintf("revision lost: v%d (%s when the outage began); storage now %s", s.Release.Version, s.Status(), framework.Describe(stored)))
		}
	}
	out.counters = fmt.Sprintf("failures %d, install %d, upgrade %d", end.Status.Failures, end.Status.InstallFailures, end.Status.UpgradeFailures)
	out.events = tr.eventsSince(name, eventsBefore)
	out.remediations = remediationEvents(tr.ns, name) - remBefore
	if tr.cell.expires() {
		tr.checkExpired(&out, end)
		return out
	}
	if len(stored) != len(before)+1 {
		out.broken = append(out.broken, fmt.Sprintf("Helm storage %s, before the action %s: want one revision more", framework.Describe(stored), framework.Describe(before)))
	}
	// No hook run again once the readiness wait began.
	obs.mu.Lock()
	for _, hook := range []string{name + "-pre", name + "-post"} {
		if len(obs.hookWrites[hook]) == 0 {
			// The check below would pass for want of looking.
			out.broken = append(out.broken, fmt.Sprintf("the proxy saw no write of hook Job %s", hook))
		}
	}
	for hook, times := range obs.hookWrites {
		after := 0
		for _, at := range times {
			if at.After(obs.waitBegan) {
				after++
			}
		}
		allowed := 0
		if tr.cell.strategy == v2.BeforeHooks && strings.HasSuffix(hook, "-post") {
			allowed = 1 // beforeHooks runs the post hooks after the wait
		}
		if after > allowed {
			out.broken = append(out.broken, fmt.Sprintf("hook %s ran %d time(s) after the readiness wait began", hook, after))
		}
	}
	obs.mu.Unlock()
	// No remediation, failure counters as without the outage.
	if out.remediations > 0 {
		out.broken = append(out.broken, fmt.Sprintf("%d rollback/uninstall event(s): %s", out.remediations, out.events))
	}
	if end.Status.Failures != 0 || end.Status.InstallFailures != 0 || end.Status.UpgradeFailures != 0 {
		out.broken = append(out.broken, fmt.Sprintf("failure counters: failures %d, install %d, upgrade %d; want 0 as without the outage",
			end.Status.Failures, end.Status.InstallFailures, end.Status.UpgradeFailures))
	}
	return out
}

// checkExpired checks a run whose action timed out during the outage.
// The timeout is the user's: the wait failed, and the user learns so (an
// InstallFailed or UpgradeFailed event naming the resources not ready).
// But Helm could not record the failure: the revision lives in Helm
// storage on the cluster that cannot be reached, where it stays pending.
// Then, as after an interrupted action, the failure is not counted
// towards remediation nor remediated; once the cluster is back the next
// reconcile finishes the pending revision (afterHooks resumes its wait for
// a last look, beforeHooks unlocks it as failed, PendingRelease, and
// tries again) and the release ends Ready. Remediating at once left the
// revision pending in storage for good behind the rollback.
func (tr *remoteTrials) checkExpired(out *remoteOutcome, end *v2.HelmRelease) {
	failed := helmv2.InstallFailedReason
	if tr.cell.action == "upgrade" {
		failed = helmv2.UpgradeFailedReason
	}
	if !strings.Contains(out.events, failed) {
		out.broken = append(out.broken, fmt.Sprintf("no %s event for the wait that timed out; events: %s", failed, out.events))
	}
	if end.Status.InstallFailures != 0 || end.Status.UpgradeFailures != 0 {
		out.broken = append(out.broken, fmt.Sprintf("a failure Helm could not record counted towards remediation: %s; events: %s", out.counters, out.events))
	}
	if out.remediations > 0 {
		out.broken = append(out.broken, fmt.Sprintf("%d rollback/uninstall event(s) for a failure Helm could not record: %s", out.remediations, out.events))
	}
}

// eventCounts is how often each event of the release ns/name occurred,
// by event object.
func eventCounts(ns, name string) map[string]int32 {
	events, _ := env.Events(context.Background(), ns, name)
	out := map[string]int32{}
	for _, ev := range events {
		out[ev.Name] = max(ev.Count, 1)
	}
	return out
}

// eventsSince lists the reasons of the release's events that occurred
// since before was taken, oldest first, repeats counted.
func (tr *remoteTrials) eventsSince(name string, before map[string]int32) string {
	events, err := env.Events(context.Background(), tr.ns, name)
	if err != nil {
		return err.Error()
	}
	var out []string
	for _, ev := range events {
		n := max(ev.Count, 1) - before[ev.Name]
		if n <= 0 || ev.Reason == "AfterHooksStarted" || ev.Reason == "AfterHooksWaiting" || strings.HasPrefix(ev.Reason, "HelmChart") {
			continue
		}
		r := ev.Reason
		if n > 1 {
			r += fmt.Sprintf("×%d", n)
		}
		out = append(out, r)
	}
	return strings.Join(out, " → ")
}

// watch records the hooks and the wait of a run and starts the outage at
// a random moment early in the wait.
func (tr *remoteTrials) watch(r *http.Request, name string, obs *remoteObserved) {
	c := framework.ParseCall(r)
	if c.Namespace != tr.ns {
		return
	}
	now := time.Now()
	obs.mu.Lock()
	defer obs.mu.Unlock()
	if c.Writes() && c.Resource == "jobs" && strings.HasPrefix(c.Name, name+"-") {
		obs.hookWrites[c.Name] = append(obs.hookWrites[c.Name], now)
	}
	if !obs.waitBegan.IsZero() || !isWait(c, name) {
		return
	}
	obs.waitBegan = now
	delay := time.Duration(tr.rand.Int64N(int64(remoteStrikeWindow)))
	go obs.strikeOnce.Do(func() {
		time.Sleep(delay)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		stored, _ := env.ReadStorage(ctx, tr.remote.Client, tr.ns, name)
		tr.proxy.Outage(remoteOutage)
		obs.mu.Lock()
		obs.strikeAt, obs.atStrike = time.Now(), stored
		obs.mu.Unlock()
		close(obs.struck)
	})
}

func (tr *remoteTrials) patchValues(hr *v2.HelmRelease, values string) error {
	ctx := context.Background()
	cur := &v2.HelmRelease{}
	if err := env.Get(ctx, cur, hr.Namespace, hr.Name); err != nil {
		return err
	}
	cur.Spec.Values = framework.JSON(values)
	return env.Client.Update(ctx, cur)
}

// awaitReady waits until the release is Ready at version with reason and
// Helm storage on the remote cluster holds no revision in flight, calling
// look with every state read.
func (tr *remoteTrials) awaitReady(name, reason string, version int, look func(*v2.HelmRelease)) (*v2.HelmRelease, error) {
	cur := &v2.HelmRelease{}
	err := env.Poll(5*time.Minute, func(ctx context.Context) error {
		if err := tr.ctl.Running(); err != nil {
			return errors.Join(errStop, err)
		}
		if err := env.Get(ctx, cur, tr.ns, name); err != nil {
			return err
		}
		if look != nil {
			look(cur)
		}
		stored, err := env.ReadStorage(ctx, tr.remote.Client, tr.ns, name)
		if err != nil {
			return err
		}
		if err := settled(cur, stored); err != nil {
			return err
		}
		return framework.ReleaseReady(cur, framework.ReleaseWant{Reason: reason, Version: version})
	})
	return cur, err
}

// readyLie returns a description when hr says Ready for its generation
// while its application on the remote cluster is not ready.
func (tr *remoteTrials) readyLie(hr *v2.HelmRelease) string {
	if hr.Status.ObservedGeneration != hr.Generation || !conditions.IsReady(hr) {
		return ""
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	d := &appsv1.Deployment{}
	if err := tr.remote.Client.Get(ctx, client.ObjectKey{Namespace: tr.ns, Name: hr.Name}, d); err != nil {
		return "Ready=True while the application cannot be read on the remote cluster: " + err.Error()
	}
	if d.Status.ObservedGeneration != d.Generation || d.Status.ReadyReplicas != 1 || d.Status.UpdatedReplicas != 1 {
		return fmt.Sprintf("Ready=True while the application on the remote cluster is not ready: generation %d observed %d, %d ready, %d updated",
			d.Generation, d.Status.ObservedGeneration, d.Status.ReadyReplicas, d.Status.UpdatedReplicas)
	}
	return ""
}

func summarizeRemote(c remoteCell, outs []remoteOutcome) string {
	var into, after []time.Duration
	var during []string
	refused, resets, cut := 0, 0, 0
	var last remoteOutcome
	for _, o := range outs {
		if o.readyAfter == 0 {
			continue
		}
		last = o
		into = append(into, o.intoWait)
		after = append(after, o.readyAfter)
		refused += o.refused
		resets += o.resets
		cut += o.cut
		for _, d := range o.during {
			if !slices.Contains(during, d) {
				during = append(during, d)
			}
		}
	}
	note := fmt.Sprintf("timeout %s, app ready %s after its start; outage began %s into the wait, cut %d request(s) in flight, "+
		"reset %d new connection(s), refused %d request(s); Ready %s after the outage ended",
		c.actionTimeout(), remoteAppDelay, spread(into), cut, resets, refused, spread(after))
	if c.expires() {
		note += fmt.Sprintf("; storage %s, %s, events %s", last.storage, last.counters, last.events)
	} else {
		note += ", no extra revision, no remediation"
	}
	return note + "; during the outage: " + strings.Join(during, ", ")
}
