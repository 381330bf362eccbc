package controller

import (
	"context"
	"encoding/json"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/wait"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v2 "github.com/afterhooks/helm-controller/api/v2"
)

// cacheSyncTimeout bounds the wait for the cache to show a reconcile's own
// status write; upstream waits as long.
const cacheSyncTimeout = 10 * time.Second

// cacheSyncPoll is how often the cache is read while waiting. The watch
// usually brings the write back within milliseconds; a short poll keeps the
// worker from idling long after it did.
const cacheSyncPoll = 10 * time.Millisecond

// decisionState is the part of a HelmRelease's status that the next
// reconcile decides on: the release history, the failure counters, what
// was attempted last, and which requests were handled. It is encoded as
// JSON, which has the precision of what the API server stores, so a value
// read back from the cache compares equal to the value written.
func decisionState(st *v2.HelmReleaseStatus) string {
	b, err := json.Marshal(struct {
		ObservedGeneration          int64
		History                     helmv2.Snapshots
		Failures                    int64
		InstallFailures             int64
		UpgradeFailures             int64
		LastAttemptedReleaseAction  helmv2.ReleaseAction
		LastAttemptedRevision       string
		LastAttemptedRevisionDigest string
		LastAttemptedConfigDigest   string
		LastAttemptedGeneration     int64
		LastHandledResetAt          string
		LastHandledForceAt          string
		LastHandledPlanAt           string
		StorageNamespace            string
		HelmChart                   string
		Sequence                    *v2.SequenceStatus
	}{
		st.ObservedGeneration, st.History, st.Failures, st.InstallFailures, st.UpgradeFailures,
		st.LastAttemptedReleaseAction, st.LastAttemptedRevision, st.LastAttemptedRevisionDigest,
		st.LastAttemptedConfigDigest, st.LastAttemptedGeneration, st.LastHandledResetAt,
		st.LastHandledForceAt, st.LastHandledPlanAt, st.StorageNamespace, st.HelmChart, st.Sequence,
	})
	if err != nil {
		// Plain data does not fail to encode; should it, the caller
		// waits for nothing rather than for ever.
		return ""
	}
	return string(b)
}

// awaitCacheSync returns once the controller's cache shows what this
// reconcile wrote to obj's status through patcher, as far as the next
// reconcile decides on it (decisionState). A reconcile queued while this one
// ran starts as soon as this one returns; reading an older status from a
// cache that has not caught up, it would count failures afresh, retry what
// is stalled, or repeat a handled reset. When the writes left the decision
// state as the reconcile read it, the cache already shows it: a reconcile
// that wrote the handled request alone (most of a settled fleet's) does not
// even encode it.
func (r *HelmReleaseReconciler) awaitCacheSync(ctx context.Context, obj *v2.HelmRelease, patcher *releasePatcher) {
	if !patcher.wroteWholeObject() {
		return
	}
	want := decisionState(&obj.Status)
	if want == "" || want == decisionState(&patcher.read.Status) {
		return
	}
	key := client.ObjectKeyFromObject(obj)
	cached := &v2.HelmRelease{}
	// A stopping controller (ctx done) runs no next reconcile: it does not wait.
	err := wait.PollUntilContextTimeout(ctx, cacheSyncPoll, cacheSyncTimeout, true,
		func(ctx context.Context) (bool, error) {
			if err := r.Get(ctx, key, cached); err != nil {
				// Gone (the finalizer was removed) or unreadable: nothing
				// the next reconcile would misjudge waits on it.
				return apierrors.IsNotFound(err), nil
			}
			return decisionState(&cached.Status) == want, nil
		})
	if err != nil && ctx.Err() == nil {
		ctrl.LoggerFrom(ctx).Info("the cache did not show the status written within the wait; the next reconcile may read an older one",
			"timeout", cacheSyncTimeout.String())
	}
}
