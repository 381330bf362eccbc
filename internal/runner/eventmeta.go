package runner

import (
	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	eventv1 "github.com/fluxcd/pkg/apis/event/v1"

	v2 "github.com/afterhooks/helm-controller/api/v2"
)

// releaseEventMeta is the metadata upstream attaches to the events about a
// release, under the API group: the chart version as revision and the
// values digest as token. notification-controller reads them, e.g. to tell
// apart two events of one reason about different revisions, and commit
// status providers show the revision. Empty values are left out.
func releaseEventMeta(revision, token string) map[string]string {
	meta := map[string]string{}
	if revision != "" {
		meta[helmv2.GroupVersion.Group+"/"+eventv1.MetaRevisionKey] = revision
	}
	if token != "" {
		meta[helmv2.GroupVersion.Group+"/"+eventv1.MetaTokenKey] = token
	}
	if len(meta) == 0 {
		return nil
	}
	return meta
}

// attemptEventMeta is the event metadata of what the current reconcile
// attempts (recorded before any Helm action runs): for events raised in
// the middle of an action, before its release is at hand.
func attemptEventMeta(obj *v2.HelmRelease) map[string]string {
	return releaseEventMeta(obj.Status.LastAttemptedRevision, obj.Status.LastAttemptedConfigDigest)
}
