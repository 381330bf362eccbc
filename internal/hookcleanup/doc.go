// Package hookcleanup decides which objects an uninstall with
// spec.uninstall.deleteHookResources may delete, and keeps the two marks
// that decision rests on. The deleting itself is internal/action's
// (uninstall_hookcleanup.go there); this package reads and writes no cluster.
//
// # Proof of origin
//
// Helm puts no release labels on hook objects, and a hook of another
// release may have the same kind, namespace and name as one of this
// release's hooks (its before-hook-creation policy deletes ours and
// creates its own). The release records only say which names this
// release's hooks used, not whose object now has that name. So the
// controller marks the objects at the moment this release's hooks create
// them: internal/helmclient adds OriginAnnotation, whose value names the
// release exactly (storage namespace and release name, Helm's own key of a
// release), to every hook object Helm creates, but only to an object that
// does not exist yet or that already carries this release's mark. An
// object that exists when a hook is applied onto it (server-side apply
// changes an existing object in place) was created by someone else and is
// never claimed.
//
// Other proofs were weighed and not taken. The origin labels the post
// renderer adds (helm.toolkit.fluxcd.io/name and /namespace) reach hooks
// only under postRenderStrategy combined or separate, not under nohooks
// (the UseHelm3Defaults choice), and name the HelmRelease, not the
// release. Recording UIDs would need a store beside Helm's records that
// lives until the uninstall.
//
// Hook objects created before the option was enabled, or by an older
// version of the controller, have no mark. They are left and reported:
// nothing proves whose they are.
//
// # Guards
//
// Whatever the mark, Judge never lets a Namespace, a PersistentVolumeClaim,
// a PersistentVolume or a CustomResourceDefinition be deleted (each takes
// data or other objects with it), nor an object marked
// helm.sh/resource-policy: keep, in the chart or on the live object.
// Nor does it let a Job or a Pod go whose run has not finished
// (internal/runstate, the rule the recreate of a Job follows too): a hook
// Job that outlived its timeout, or a post-delete hook the uninstall
// stopped waiting for, may still run, and deleting it would stop its work
// halfway. Such an object is left and reported with the others, and is not
// waited for: the cleanup does not come back for it.
//
// # Kinds
//
// Of the rest, only the kinds that hold no data go by default: Jobs, Pods,
// ServiceAccounts and RBAC objects (kinds.go). A hook Secret may hold a
// generated password that the chart reads back with lookup, and a custom
// resource's operator may delete storage with it; such kinds go only when
// spec.uninstall.deleteHookResourceKinds lists them (or "*").
//
// # An interrupted cleanup
//
// The release records are the only list of a release's hooks, and Helm's
// uninstall deletes them. With the option, the uninstall keeps them until
// the cleanup is over: Helm's uninstall runs with keepHistory and records
// PendingDescription; the records are deleted (or, with keepHistory,
// given Helm's own description) only after the cleanup. A controller
// stopped in between finds the release uninstalled with that description
// (Pending) and finishes the cleanup from the records.
package hookcleanup
