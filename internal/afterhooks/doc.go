// Package afterhooks implements waitStrategy afterHooks: the readiness wait
// of an install, upgrade or rollback runs after the post hooks instead of
// before them. The whole lifecycle lives here; internal/action calls it
// from one place (withAfterHooks in its layer_afterhooks.go, and
// ResumeWait) when an action's hook order is afterHooks.
//
// # Lifecycle
//
// Start (run.go) prepares one action and returns the finish that ends it;
// between the two the caller runs Helm's action:
//
//  1. wrap: a copy of the Helm configuration whose storage driver is Wrap's
//     (held.go) and whose kube client (kube.go) awaits hook deletions and
//     records what the apply creates;
//  2. run: Helm's action on that copy with kube.HookOnlyStrategy, so Helm
//     runs pre hooks, apply and post hooks but does not wait for the
//     release's resources; the wrapper holds back the "deployed" record,
//     stored pending with a deadline (marker.go);
//  3. wait: WaitReady (wait.go), which names what is not ready;
//  4. commit or fail: Held.Commit marks the revision deployed (superseding
//     the previous one only now), Held.Fail marks it failed with what is
//     not ready and, with cleanupOnFail, the objects the action created are
//     deleted.
//
// When the controller stops during the wait the revision stays pending with
// its marker. Resume picks it up in the next run: Recover rebuilds the Held
// from storage and the wait continues for what is left of its deadline
// (ResumeTimeout); no hook runs twice. An Observer hears each phase, for
// events, the Reconciling condition and metrics.
//
// # The storage wrapper
//
// Wrap lets every write through except two:
//
//   - the Update that moves the target revision to "deployed" is stored
//     with the revision's pending status (pending-install, pending-upgrade
//     or pending-rollback) and a marker description instead; all other
//     fields of that update (hook LastRun results, notes, labels) are
//     stored as Helm wrote them;
//   - an Update that moves another revision of the same release to
//     "superseded" is deferred.
//
// # Helm v4.3.1 storage sequences
//
// Verified in helm.sh/helm/v4@v4.3.1 (the version go.mod pins). "Update" is Storage.Update, which
// calls Driver.Update with the key sh.helm.release.v1.<name>.v<version>;
// "Create" is Storage.Create, which first prunes history when MaxHistory > 0
// (pkg/storage/storage.go:70-77) and then calls Driver.Create.
//
// Install (pkg/action/install.go, RunWithContext and performInstall):
//
//  1. Replace only: the last revision (uninstalled; failed ones are left
//     alone) is updated to superseded before anything else (:726-727).
//  2. Create(rel pending-install, "Initial install underway") (:402, :476).
//  3. pre-install hooks; for each hook Update(rel pending-install) with
//     LastRun Running (pkg/action/hooks.go:90-94).
//  4. apply (:529-546), waiter.Wait/WaitWithJobs (:558-560; a no-op under
//     hookOnly, pkg/kube/statuswait.go:289-295).
//  5. post-install hooks, Update(rel pending-install) per hook (:567).
//  6. rel deployed "Install complete" (:572-576), Update(rel) (:585). HELD.
//
// On any error after the Create, failRelease sets failed "Release %q
// failed: ..." and does Update(rel failed) (:592-607); a failed post hook
// ends here with the hook's LastRun Failed in memory. Note: with
// RollbackOnFailure, Helm turns hookOnly into the status watcher (:359-361),
// so afterHooks must never set it; internal/action never does.
//
// Upgrade (pkg/action/upgrade.go):
//
//  1. MaxHistory is set on storage (:201); Last (:232) refuses a pending
//     last revision (:247); the current release is the last one when
//     deployed, else Deployed(name) (:257).
//  2. Create(upgraded pending-upgrade, "Preparing upgrade") (:409), pruning
//     first; the current (latest deployed) revision is never pruned
//     (pkg/storage/storage.go:242-263).
//  3. pre-upgrade hooks with their per-hook Updates (:460).
//  4. apply; on an apply or wait error Update(current, unchanged) (:476,
//     :488, :494, :500) followed by failRelease.
//  5. post-upgrade hooks with their per-hook Updates (:508).
//  6. current superseded, Update(current) (:514-515). DEFERRED.
//  7. upgraded deployed "Upgrade complete" (:517-522), returned to
//     RunWithContext which does Update(upgraded) (:212). HELD.
//
// failRelease (:526-536) does Update(upgraded failed, "Upgrade %q failed:
// ...") and, with CleanupOnFail, deletes the created resources (:537-554);
// the current revision keeps its status. A failed post hook takes this path.
//
// Rollback (pkg/action/rollback.go):
//
//  1. MaxHistory is set (:90); Create(target pending-rollback, "Rollback to
//     N" unless a description is given) (:100, :184-203), pruning first.
//  2. pre-rollback hooks (:233).
//  3. apply; on error the current (last) revision is set superseded and the
//     target failed: Update(current superseded), Update(target failed)
//     (:255-259), then CleanupOnFail deletes created resources (:260-269).
//  4. wait; on error Update(current unchanged), Update(target failed)
//     (:283-294).
//  5. post-rollback hooks (:300). On failure Helm returns the error WITHOUT
//     updating the target: it stays pending-rollback (with no afterHooks
//     marker, so IsAwaitingReadiness is false for it).
//  6. every deployed revision superseded: DeployedAll (:305), then
//     Update(rev superseded) for each (:310-318). DEFERRED.
//  7. target deployed (:320), Update(target) in Run (:112), description
//     still "Rollback to N". HELD.
//
// Helm's own failures pass through unchanged: when Helm writes the target
// with a status other than deployed and not pending (failed), the deferred
// supersede updates are written first, in order, so storage ends up exactly
// as without the wrapper (rollback step 3 supersedes the current revision
// on failure). A deployed update arriving after Helm failed the target (only
// possible when a cancelled context makes Helm fail the release while the
// action goes on in the background) is dropped.
//
// # Pruning
//
// Pruning only happens in Storage.Create, before Helm's Create of the target,
// and always keeps the latest deployed revision. Because superseding is
// deferred, the previous deployed revision is still deployed in storage for
// the whole action and the wait, so neither this action nor a later one
// (after Fail) can prune it. As a safety net the wrapper refuses, until
// Commit or Fail, to delete a revision that is still deployed and whose
// superseding it deferred. A deferred revision that pruning removed anyway
// (install with Replace supersedes an uninstalled revision before the
// pruning Create) is skipped by Commit, as Helm would have pruned it too.
//
// # Marker
//
// The pending revision carries the marker in its description:
//
//	Waiting for resources to become ready (afterHooks, deadline 2026-05-01T10:05:00Z); on success: Upgrade complete
//
// It names the deadline of the wait (the time the post hooks finished plus
// the timeout, UTC, second precision) and the description Helm wanted to
// record, which Commit restores. The description is stored in the encoded
// release by every storage driver and is per revision: Helm never copies it
// into a later revision. Release labels would also survive the Secret
// driver (they become Secret labels; Get strips only Helm's system labels,
// pkg/storage/driver/secrets.go:83), but Helm copies a revision's labels
// into the next one on upgrade (upgrade.go:333) and rollback
// (rollback.go:206), so a label marker would leak into later revisions.
//
// # Binding the target
//
// With Target.Version zero the target is the first revision of the release
// the action creates through the wrapper (install, upgrade and rollback
// each create exactly one). With an explicit Version, a Create of any other
// revision disarms the wrapper: deferred writes are flushed and it behaves
// like the plain driver. After Commit or Fail it passes everything
// through, so the same configuration can run further actions.
//
// # Memory driver aliasing
//
// Helm's memory driver stores the pointers it is given and returns them
// from reads, while Helm mutates release objects in place before writing
// them. The wrapper therefore copies releases on every write and read, so
// a held or deferred write can never reach storage through aliasing.
package afterhooks
