// Package recreate replaces objects the API server refuses to change in
// place: a Job whose pod template changed, a Service asked for another
// clusterIP, a StatefulSet with new volumeClaimTemplates. Helm (and
// server-side apply) can only update such an object, so the whole upgrade,
// rollback or drift correction fails on it.
//
// Recreating deletes what upstream helm-controller would keep, so it needs
// consent per object and passes guards no consent lifts:
//
//   - consent: helm.toolkit.fluxcd.io/force: enabled on the object's
//     manifest, or the RecreateImmutableResources gate for the built-in
//     kinds and fields of gateKinds (none of which holds data). An action's
//     force setting is Helm's and gives none. disabled opts out.
//     In a rollback, the annotation in the revision rolled back from
//     counts too (Policy.RolledBackFrom, Consents).
//   - guards (guard): never a PersistentVolumeClaim, PersistentVolume,
//     Namespace or CRD; never an object marked helm.sh/resource-policy:
//     keep (manifest or cluster), annotated disabled in the cluster, owned
//     by another Helm release, holding a finalizer another party removes,
//     a Job that has not finished, an object anything depends on that
//     the new object does not make again (remadeBy: a Job's pods, a
//     Deployment's ReplicaSets; a custom resource makes nothing again), or
//     a StatefulSet whose selector changes;
//   - the API server must accept the new version as a new object (a dry
//     run), so an invalid manifest deletes nothing.
//
// A refused replace (Helm's force with client-side apply, refused even
// for an unchanged Job) is first tried again as a patch (Refused.InPlace):
// only a patch refused too recreates.
//
// Then that one object is deleted on condition of its UID, waited for
// within the action's deadline (a shutdown ends the wait) and created
// again; every other object is updated as usual. A StatefulSet's pods are
// orphaned for the new one to adopt.
//
// Helm actions get it through Wrap (a kube client), drift correction
// through Policy.Recreate, both with the release's one Policy and its
// Memory, so an object refused again after its recreate is not recreated
// in a loop. A plan asks Policy.Judge, which runs the same checks
// (decide) with reads and dry runs only and says whether the object would
// be recreated, with whose consent, or why not.
package recreate
