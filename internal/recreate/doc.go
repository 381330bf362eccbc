// Package recreate replaces objects the API server refuses to change in
// place: a Job whose pod template changed, a Service asked for another
// clusterIP, a StatefulSet with new volumeClaimTemplates. Helm (and
// server-side apply) can only update such an object, so the whole upgrade,
// rollback or drift correction fails on it.
//
// An object may be recreated when its manifest says
// helm.toolkit.fluxcd.io/force: enabled, or when the controller-wide
// feature gate or the action's force setting makes every object
// recreatable (an object saying helm.toolkit.fluxcd.io/force: disabled
// still opts out). Recreating deletes that one object, waits until it is
// gone and creates it again; every other object is updated as usual.
// Deletion keeps data: a StatefulSet's pods are orphaned (the new
// StatefulSet adopts them, and their PersistentVolumeClaims stay), and
// PersistentVolumeClaims, PersistentVolumes, Namespaces and
// CustomResourceDefinitions are never recreated.
//
// Helm actions get it through Wrap (a kube client), drift correction
// through Replace.
package recreate
