package waitcause

import (
	releasev1 "helm.sh/helm/v4/pkg/release/v1"
	releaseutil "helm.sh/helm/v4/pkg/release/v1/util"
	"sigs.k8s.io/yaml"
)

// Release is what the causes of a failed wait are judged against: which
// objects the release's manifest makes, and which post hooks of the
// action are still to run after the wait.
type Release struct {
	// Made holds "Kind/namespace/name" of every object of the manifest.
	Made map[string]bool
	// PendingPostHooks counts the post hooks of the action that have not
	// run; PostEvent is their event (post-install, post-upgrade, …).
	PendingPostHooks int
	PostEvent        releasev1.HookEvent
}

// ReleaseOf reads rel for the causes of its action's failed wait: the
// objects of its manifest, and the hooks of event post that have not run
// (none when the action disables hooks: they never run). A nil rel makes
// nothing and has no hooks.
func ReleaseOf(rel *releasev1.Release, post releasev1.HookEvent, hooksDisabled bool) Release {
	out := Release{Made: map[string]bool{}, PostEvent: post}
	if rel == nil {
		return out
	}
	for _, doc := range releaseutil.SplitManifests(rel.Manifest) {
		var head struct {
			Kind     string `json:"kind"`
			Metadata struct {
				Name      string `json:"name"`
				Namespace string `json:"namespace"`
			} `json:"metadata"`
		}
		// A document that does not parse was not applied either: Helm
		// fails the action before its wait.
		if err := yaml.Unmarshal([]byte(doc), &head); err != nil || head.Kind == "" {
			continue
		}
		ns := head.Metadata.Namespace
		if ns == "" {
			ns = rel.Namespace
		}
		out.Made[head.Kind+"/"+ns+"/"+head.Metadata.Name] = true
	}
	if hooksDisabled {
		return out
	}
	for _, h := range rel.Hooks {
		// A hook that has not run has no phase yet.
		if h == nil || (h.LastRun.Phase != "" && h.LastRun.Phase != releasev1.HookPhaseUnknown) {
			continue
		}
		for _, e := range h.Events {
			if e == post {
				out.PendingPostHooks++
				break
			}
		}
	}
	return out
}
