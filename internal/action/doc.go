// Package action maps a HelmRelease onto the Helm v4 SDK: it turns the
// spec into the options of Helm's install, upgrade, test, rollback and
// uninstall actions (one file per verb), runs them on a Helm
// configuration, and reads release history from Helm storage for the
// runner. It writes no status and emits no events, and it decides nothing:
// each function is handed a Call, the controller's Config (feature gates,
// built once in main.go), the action's plan (internal/plan: the hook
// order, the waits, the ordering, the recreate policy, the apply method,
// the post-render strategy, decided by internal/runner) and an Observer
// that hears what the action does. The actions read no storage to decide
// anything (Helm's own actions read it, theirs to do);
// TestTheActionDecidesNothing holds that.
//
// Our features reach Helm as wrappers of its kube client and storage,
// stacked from the plan alone by one function, stacked (stack.go), in a
// fixed order: recreate (layer_recreate.go), afterHooks
// (layer_afterhooks.go), ordering (layer_ordering.go). The hook cleanup of
// spec.uninstall.deleteHookResources is part of the uninstall
// (uninstall_hookcleanup.go).
//
// # Configuration
//
// ConfigFactory builds a *helmaction.Configuration per HelmRelease: a Helm
// kube client bound to the release (target) namespace and a Secret storage
// driver in the storage namespace. Objects are applied with the field manager
// "helm-controller" unless WithFieldManager says otherwise.
//
// # Option mapping
//
// Every function maps the HelmRelease fields the way upstream helm-controller
// does (the API is v1.7.1's; behaviour is compared with the v1.6.4 binary,
// the newest that builds here), with these choices spelled out:
//
//   - Release name: spec.releaseName, or '[targetNamespace-]name'; names longer
//     than 53 characters are shortened to their first 40 characters, a dash
//     and the first 12 hex characters of the SHA-256 of the full name (see
//     ReleaseName in api/v2). The formula matches upstream so existing
//     releases are found again.
//   - Timeouts and waits are the plan's (see internal/plan): the action's
//     own timeout, else spec.timeout, else 5m; disableWait selects Helm's
//     hookOnly strategy (hooks are still watched, the release resources
//     are not), otherwise spec.waitStrategy.name picks "poller" (Helm's
//     kstatus watcher) or "legacy" (Helm 3's polling); waitForJobs is the
//     inverse of disableWaitForJobs.
//   - createNamespace: only with a targetNamespace, as upstream; the
//     HelmRelease's own namespace exists.
//   - Server-side apply: install takes spec.install.serverSideApply (a bool);
//     upgrade and rollback take enabled/disabled/auto, passed to Helm as
//     "true"/"false"/"auto". Under server-side apply conflicts are always
//     forced (ForceConflicts); `force` then has no effect. Under client-side
//     apply `force` means replacing objects (ForceReplace). Whether objects
//     are applied server-side is the plan's (plan.Apply): Helm resolves
//     "auto" from a stored release's apply method, so internal/runner reads
//     that release before the action and the plan resolves "auto" the way
//     Helm will (the upgrade's newest revision through Plan.Upgrading, the
//     rollback's target through Plan.Follow), for the force flags Helm
//     accepts and for the CRD step; Helm itself is still handed "auto".
//   - Ownership: Helm takes ownership of existing objects unless
//     disableTakeOwnership is set, upstream's default since v1.2.
//   - preserveValues: ReuseValues=true and ResetValues=false, so Helm merges
//     the values of the last release under the new ones. Without it,
//     ResetValues=true: the release gets exactly the values computed by the
//     caller, which keeps the HelmRelease declarative.
//   - CRDs: the policy is spec.<action>.crds, Create when unset for both
//     actions (upstream's code; its API documentation says Skip for
//     upgrades), and the deprecated skipCRDs is not read, as upstream does
//     not read it. This package applies the chart's CRDs itself, before the
//     Helm action, and always sets SkipCRDs on the action: Skip does
//     nothing; Create applies every CRD server-side (creating or updating
//     it), or client-side creates the missing ones and leaves existing ones
//     alone; CreateReplace creates missing CRDs and updates existing ones.
//     See applyCRDs.
//   - maxHistory: spec.maxHistory, default 5, 0 for unlimited.
//   - postRenderStrategy: the plan's (spec.postRenderStrategy, else the
//     default below), passed to Helm.
//   - DNS lookups in templates: Config.AllowDNSLookups.
//
// # UseHelm3Defaults
//
// Helm 4 changed a few defaults. With the UseHelm3Defaults feature gate
// (Config.UseHelm3Defaults, which internal/runner hands the plan as
// plan.Settings.Helm3Defaults; the action never reads it), Helm 3's
// behaviour is used wherever the HelmRelease leaves the choice open;
// explicit fields always win, and the plan records the outcome
// (Plan.Apply, Plan.PostRenderStrategy, Plan.Wait.Readiness):
//
//   - install applies client-side (Helm 4: server-side);
//   - the readiness wait uses the legacy strategy (Helm 4: kstatus watcher);
//   - post-renderers do not see hooks, postRenderStrategy "nohooks"
//     (Helm 4: "combined").
//
// Upgrade and rollback keep "auto" when serverSideApply is unset, gate or not:
// Helm then keeps the apply method the release was installed with, so
// releases installed under the gate (or by Helm 3) stay client-side, and
// releases already applied server-side are not switched back, which would
// leave server-side field ownership behind.
//
// # afterHooks
//
// Install, Upgrade and Rollback run with waitStrategy afterHooks when the
// plan's hook order says so: withAfterHooks (a layer like the others) hands
// stacked the configuration internal/afterhooks prepared, on which Helm's
// action runs with the plan's hookOnly wait, and a finish that does the
// readiness wait after the post hooks. ResumeWait finishes such a wait
// after a restart.
package action
