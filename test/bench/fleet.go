package bench

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	"github.com/fluxcd/pkg/apis/meta"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v2 "github.com/afterhooks/helm-controller/api/v2"
	"github.com/afterhooks/helm-controller/test/e2e/framework"
)

const (
	// fleetPollInterval is how often the fleet is listed while waiting.
	fleetPollInterval = time.Second
	// progressInterval spaces the "k of N" lines of a long wait.
	progressInterval = 15 * time.Second
	// unreadyListed bounds how many unfinished releases an error names.
	unreadyListed = 5
)

func releaseName(i int) string { return fmt.Sprintf("podinfo-%d", i) }

// shardLabel is the label Flux's sharding selects on.
const shardLabel = "sharding.fluxcd.io/key"

func shardKey(shard int) string { return fmt.Sprintf("shard%d", shard+1) }

// shardOf is the shard release i belongs to: the fleet is dealt out in turn.
func shardOf(i, shards int) int { return i % shards }

// podinfoRelease is release i of the fleet: the podinfo chart from the
// HelmRepository through a chart template, with default install settings
// but for the environment's wait strategy.
func (env *environment) podinfoRelease(i int) *v2.HelmRelease {
	hr := &v2.HelmRelease{
		ObjectMeta: metav1.ObjectMeta{Name: releaseName(i), Namespace: fleetNamespace},
		Spec: v2.HelmReleaseSpec{HelmReleaseSpec: helmv2.HelmReleaseSpec{
			Interval: metav1.Duration{Duration: env.interval},
			// Set, not defaulted, so uniqueness does not hang on the
			// defaulting rule.
			ReleaseName: releaseName(i),
			Chart: &helmv2.HelmChartTemplate{Spec: helmv2.HelmChartTemplateSpec{
				Chart:     env.podinfo.Name,
				Version:   env.podinfo.Version,
				SourceRef: &helmv2.CrossNamespaceObjectReference{Kind: sourcev1.HelmRepositoryKind, Name: repositoryName},
			}},
		}},
	}
	if env.shards > 0 {
		hr.Labels = map[string]string{shardLabel: shardKey(shardOf(i, env.shards))}
	}
	if env.waitStrategy != "" {
		hr.Spec.Install = &v2.Install{WaitStrategy: env.waitStrategy}
		hr.Spec.Upgrade = &v2.Upgrade{WaitStrategy: env.waitStrategy}
	}
	return hr
}

// createFleet creates releases podinfo-0 … podinfo-(n-1).
func (env *environment) createFleet(ctx context.Context, n int) error {
	return framework.ForEach(ctx, n, func(ctx context.Context, i int) error {
		if err := env.client.Create(ctx, env.podinfoRelease(i)); err != nil {
			return fmt.Errorf("creating HelmRelease %s: %w", releaseName(i), err)
		}
		return nil
	})
}

// requestReconcile sets reconcile.fluxcd.io/requestedAt to token on every
// release, which asks the controller for a reconcile without changing the
// spec.
func (env *environment) requestReconcile(ctx context.Context, n int, token string) error {
	patch := fmt.Appendf(nil, `{"metadata":{"annotations":{%q:%q}}}`, meta.ReconcileRequestAnnotation, token)
	return framework.ForEach(ctx, n, func(ctx context.Context, i int) error {
		hr := &v2.HelmRelease{ObjectMeta: metav1.ObjectMeta{Name: releaseName(i), Namespace: fleetNamespace}}
		if err := env.client.Patch(ctx, hr, client.RawPatch(types.MergePatchType, patch)); err != nil {
			return fmt.Errorf("annotating HelmRelease %s: %w", releaseName(i), err)
		}
		return nil
	})
}

// releaseCheck reports whether a release has reached what a wait is for,
// and if not, a short reason.
type releaseCheck func(hr *v2.HelmRelease) (done bool, why string)

// readyForGeneration: Ready=True for the current spec.
func readyForGeneration(hr *v2.HelmRelease) (bool, string) {
	ready := apimeta.FindStatusCondition(hr.Status.Conditions, meta.ReadyCondition)
	switch {
	case ready == nil:
		return false, "no Ready condition yet"
	case hr.Status.ObservedGeneration != hr.Generation || ready.ObservedGeneration != hr.Generation:
		return false, fmt.Sprintf("generation %d not observed yet (status at %d)", hr.Generation, hr.Status.ObservedGeneration)
	case ready.Status != metav1.ConditionTrue:
		return false, "Ready " + describeCondition(ready)
	}
	return true, ""
}

// handledAndReady: the reconcile asked for with token has run and the
// release is still Ready.
func handledAndReady(token string) releaseCheck {
	return func(hr *v2.HelmRelease) (bool, string) {
		if got := hr.Status.LastHandledReconcileAt; got != token {
			return false, fmt.Sprintf("lastHandledReconcileAt %q, want %q", got, token)
		}
		return readyForGeneration(hr)
	}
}

// fleetWait is one wait for the whole fleet to pass a check.
type fleetWait struct {
	what     string
	releases int
	timeout  time.Duration
	check    releaseCheck
	// alive fails the wait at once when the controller is gone.
	alive    func() error
	progress io.Writer
}

// waitFleet lists the fleet every second until every release passes the
// check. On timeout the error names the releases that did not.
func (env *environment) waitFleet(ctx context.Context, w fleetWait) error {
	began := time.Now()
	ctx, cancel := withTimeout(ctx, w.timeout, w.what)
	defer cancel()
	var pending []string
	lastReport := began
	err := pollEvery(ctx, fleetPollInterval, func(ctx context.Context) (bool, error) {
		if err := w.alive(); err != nil {
			return false, err
		}
		var err error
		pending, err = env.pendingReleases(ctx, w.releases, w.check)
		if err != nil {
			return false, err
		}
		if time.Since(lastReport) >= progressInterval {
			lastReport = time.Now()
			fmt.Fprintf(w.progress, "%s: %d of %d after %s\n", w.what,
				w.releases-len(pending), w.releases, time.Since(began).Round(time.Second))
		}
		return len(pending) == 0, nil
	})
	if err != nil {
		return fmt.Errorf("%w; %d of %d releases not there: %s", err, len(pending), w.releases, summarize(pending))
	}
	return nil
}

// pendingReleases lists the fleet and describes each release that does not
// pass check (or does not exist), sorted by name.
func (env *environment) pendingReleases(ctx context.Context, n int, check releaseCheck) ([]string, error) {
	var list v2.HelmReleaseList
	if err := env.client.List(ctx, &list, client.InNamespace(fleetNamespace)); err != nil {
		return nil, fmt.Errorf("listing the HelmReleases: %w", err)
	}
	byName := make(map[string]*v2.HelmRelease, len(list.Items))
	for i := range list.Items {
		byName[list.Items[i].Name] = &list.Items[i]
	}
	var pending []string
	for i := range n {
		hr, found := byName[releaseName(i)]
		if !found {
			pending = append(pending, releaseName(i)+" (not found)")
			continue
		}
		if done, why := check(hr); !done {
			pending = append(pending, fmt.Sprintf("%s (%s)", hr.Name, why))
		}
	}
	return pending, nil
}

func summarize(pending []string) string {
	if len(pending) <= unreadyListed {
		return strings.Join(pending, "; ")
	}
	return fmt.Sprintf("%s; and %d more", strings.Join(pending[:unreadyListed], "; "), len(pending)-unreadyListed)
}
