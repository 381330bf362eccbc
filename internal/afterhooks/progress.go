package afterhooks

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"helm.sh/helm/v4/pkg/release/common"
	releasev1 "helm.sh/helm/v4/pkg/release/v1"
)

// HookProgress says which hook of an action is running.
type HookProgress struct {
	// Event is the hook event being run, e.g. "post-install".
	Event string
	// Index is the running hook's position (1-based) among the Total hooks
	// of Event, in the order Helm runs them.
	Index, Total int
	// Kind and Name identify the hook resource, e.g. Job "minio-post-job".
	Kind, Name string
}

// String words the progress for a condition message:
// "running post-install hooks 1/2: job/minio-post-job".
func (p HookProgress) String() string {
	return fmt.Sprintf("running %s hooks %d/%d: %s/%s", p.Event, p.Index, p.Total, strings.ToLower(p.Kind), p.Name)
}

// runningHook finds the hook of rel that Helm just started (LastRun phase
// Running) for the action behind the pending status.
func runningHook(rel *releasev1.Release, pending common.Status) (HookProgress, bool) {
	for _, h := range rel.Hooks {
		if h == nil || h.LastRun.Phase != releasev1.HookPhaseRunning {
			continue
		}
		event, ok := actionEvent(h, pending)
		if !ok {
			continue
		}
		hooks := HooksInRunOrder(rel.Hooks, event)
		for i, other := range hooks {
			if other == h {
				return HookProgress{Event: string(event), Index: i + 1, Total: len(hooks), Kind: h.Kind, Name: h.Name}, true
			}
		}
	}
	return HookProgress{}, false
}

// actionEvent is the event of h that belongs to the action behind pending.
// A hook registered for both pre and post events of one action runs twice;
// while it runs, the post event is reported when its pre run is recorded.
func actionEvent(h *releasev1.Hook, pending common.Status) (releasev1.HookEvent, bool) {
	var pre, post releasev1.HookEvent
	switch pending {
	case common.StatusPendingInstall:
		pre, post = releasev1.HookPreInstall, releasev1.HookPostInstall
	case common.StatusPendingUpgrade:
		pre, post = releasev1.HookPreUpgrade, releasev1.HookPostUpgrade
	case common.StatusPendingRollback:
		pre, post = releasev1.HookPreRollback, releasev1.HookPostRollback
	default:
		return "", false
	}
	hasPre, hasPost := false, false
	for _, e := range h.Events {
		hasPre = hasPre || e == pre
		hasPost = hasPost || e == post
	}
	switch {
	case hasPre && hasPost:
		return post, true
	case hasPre:
		return pre, true
	case hasPost:
		return post, true
	}
	return "", false
}

// HooksInRunOrder lists the hooks among hooks that run for event, in the
// order Helm runs them: by weight, then by name. The progress reported
// here and the hooks a preview lists follow this one order.
func HooksInRunOrder(hooks []*releasev1.Hook, event releasev1.HookEvent) []*releasev1.Hook {
	var run []*releasev1.Hook
	for _, h := range hooks {
		if h != nil && slices.Contains(h.Events, event) {
			run = append(run, h)
		}
	}
	sort.SliceStable(run, func(i, j int) bool {
		if run[i].Weight != run[j].Weight {
			return run[i].Weight < run[j].Weight
		}
		return run[i].Name < run[j].Name
	})
	return run
}
