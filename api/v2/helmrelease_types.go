package v2

import (
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// HookWaitStrategy orders the readiness wait of a Helm action relative to
// the action's post hooks.
// +kubebuilder:validation:Enum=beforeHooks;afterHooks
type HookWaitStrategy string

const (
	// BeforeHooks is Helm's own order: apply, wait until the release's
	// resources are ready, then run the post hooks. It is the default.
	BeforeHooks HookWaitStrategy = "beforeHooks"

	// AfterHooks runs the post hooks first and waits for readiness last:
	// CRDs (per policy), pre hooks, apply, post hooks, then the readiness
	// wait. Charts whose workloads need what a post hook creates (a Secret,
	// a database schema, a bucket) become ready instead of deadlocking.
	AfterHooks HookWaitStrategy = "afterHooks"
)

// HelmReleaseSpec defines the desired state of a Helm release.
type HelmReleaseSpec struct {
	// Upstream's spec, with Install, Upgrade and Rollback replaced by the
	// versions below that carry waitStrategy, Uninstall by one that carries
	// deleteHookResources, and WaitStrategy by one that also accepts
	// ordered. The embedded spec still has its own fields of those names;
	// they are shadowed (JSON, deepcopy and the CRD only see the fields
	// declared here) and stay nil. Always use Spec.Install or GetInstall,
	// never Spec.HelmReleaseSpec.Install (and so on): a test of this
	// package fails on any such selector in the repository, and another on
	// any new shadowed field. Upstream's read-only helpers that consult
	// these fields (GetActiveRemediation, GetWaitStrategy, ...) are methods
	// of HelmRelease; see upstream.go.
	helmv2.HelmReleaseSpec `json:",inline"`

	// Install holds the configuration for Helm install actions for this HelmRelease.
	// +optional
	Install *Install `json:"install,omitempty"`

	// Upgrade holds the configuration for Helm upgrade actions for this HelmRelease.
	// +optional
	Upgrade *Upgrade `json:"upgrade,omitempty"`

	// Rollback holds the configuration for Helm rollback actions for this HelmRelease.
	// +optional
	Rollback *Rollback `json:"rollback,omitempty"`

	// Uninstall holds the configuration for Helm uninstall actions for this HelmRelease.
	// +optional
	Uninstall *Uninstall `json:"uninstall,omitempty"`

	// WaitStrategy is upstream's wait strategy with one more name, ordered.
	// +optional
	WaitStrategy *WaitStrategy `json:"waitStrategy,omitempty"`

	// DependsOn lists the objects that must be there, or ready, before
	// this HelmRelease is installed or upgraded. An entry without kind
	// names a HelmRelease, which must be ready; an entry with kind (and
	// apiVersion) names an object of any kind, which must exist, and with
	// ready: true also be ready as kstatus judges it.
	// +optional
	DependsOn []DependencyReference `json:"dependsOn,omitempty"`
}

// DependencyReference names one object a HelmRelease waits for: upstream's
// dependency reference (name, namespace, readyExpr) that may also name an
// object of any kind.
type DependencyReference struct {
	// APIVersion is the group and version of the object ("v1",
	// "apps/v1", "example.com/v1beta1"). Required with kind; leave both
	// unset to name a HelmRelease.
	// +optional
	APIVersion string `json:"apiVersion,omitempty"`

	// Kind is the kind of the object (Deployment, Secret,
	// CustomResourceDefinition, ...). Unset, the entry names a
	// HelmRelease, checked as it always was: it must be Ready for its
	// current generation, whatever ready says.
	// +optional
	Kind string `json:"kind,omitempty"`

	// Name is the name of the object.
	// +required
	Name string `json:"name"`

	// Namespace is the namespace of the object, the HelmRelease's own when
	// unset. Leave it unset for a cluster-scoped kind.
	// +optional
	Namespace string `json:"namespace,omitempty"`

	// Ready, for an entry with kind, asks for the object to be ready
	// (kstatus Current: for Flux objects, Ready True for their current
	// generation) rather than only to exist. An entry without kind is
	// always checked for readiness.
	// +optional
	Ready bool `json:"ready,omitempty"`

	// ReadyExpr is a CEL expression returning a bool that says whether the
	// object is ready; it sees the object as dep and this HelmRelease as
	// self. It replaces the built-in readiness check, or adds to it when
	// the AdditiveCELDependencyCheck feature gate is enabled.
	// +optional
	ReadyExpr string `json:"readyExpr,omitempty"`
}

// IsHelmRelease tells whether the entry names a HelmRelease checked as
// upstream checks it: an entry without kind.
func (in DependencyReference) IsHelmRelease() bool {
	return in.Kind == ""
}

// Upstream returns the entry as upstream's reference: name, namespace and
// readyExpr, the fields upstream's API knows.
func (in DependencyReference) Upstream() helmv2.DependencyReference {
	return helmv2.DependencyReference{Name: in.Name, Namespace: in.Namespace, ReadyExpr: in.ReadyExpr}
}

// WaitStrategyOrdered applies a release in the order its chart declares
// with HIP-0025's annotations (resource groups, subchart depends-on),
// waiting for each batch to be ready before the next; readiness is judged
// as by the poller, or by the chart's readiness expressions. Without those
// annotations it behaves as the poller.
const WaitStrategyOrdered helmv2.WaitStrategyName = "ordered"

// WaitStrategy is upstream's spec.waitStrategy, whose name may also be
// ordered.
type WaitStrategy struct {
	// Name is the strategy for waiting for applied resources to become
	// ready. 'poller' uses kstatus to poll resource statuses, 'legacy' Helm
	// v3's waiting logic. 'ordered' applies the release in the order its
	// chart declares with the annotations of Helm's HIP-0025
	// (helm.sh/resource-group, helm.sh/depends-on/resource-groups, and
	// helm.sh/depends-on/subcharts in Chart.yaml), waiting for each group
	// with the poller or the chart's helm.sh/readiness-success and
	// helm.sh/readiness-failure expressions, and uninstalls in reverse.
	// Defaults to 'poller', or to 'legacy' when the UseHelm3Defaults
	// feature gate is enabled.
	// +kubebuilder:validation:Enum=poller;legacy;ordered
	// +required
	Name helmv2.WaitStrategyName `json:"name"`

	// ReadinessTimeout bounds, with name ordered, how long each batch of
	// resource groups may take to become ready (or, when deleted, to be
	// gone), as HIP-0025's readiness timeout does; the action's timeout
	// still bounds the whole action. Unset, only the action's timeout
	// applies.
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern="^([0-9]+(\\.[0-9]+)?(ms|s|m|h))+$"
	// +optional
	ReadinessTimeout *metav1.Duration `json:"readinessTimeout,omitempty"`
}

// GetReadinessTimeout returns spec.waitStrategy.readinessTimeout, zero
// when unset.
func (in *HelmRelease) GetReadinessTimeout() time.Duration {
	if in.Spec.WaitStrategy == nil || in.Spec.WaitStrategy.ReadinessTimeout == nil {
		return 0
	}
	return in.Spec.WaitStrategy.ReadinessTimeout.Duration
}

// Our status is upstream's with one more field, the plan of the last
// ordered action. Its description is upstream's word for word, which the
// CRD superset test requires.

// HelmReleaseStatus defines the observed state of a HelmRelease.
type HelmReleaseStatus struct {
	helmv2.HelmReleaseStatus `json:",inline"`

	// Sequence is the plan of the last action applied or uninstalled in
	// order (spec.waitStrategy.name ordered), and where each of its
	// batches is. Cleared when an action runs without order.
	// +optional
	Sequence *SequenceStatus `json:"sequence,omitempty"`

	// LastHandledPlanAt is the last helm.toolkit.fluxcd.io/planRequestedAt
	// value a plan was computed for, as lastHandledReconcileAt records
	// reconcile.fluxcd.io/requestedAt.
	// +optional
	LastHandledPlanAt string `json:"lastHandledPlanAt,omitempty"`
	// LastPlan summarises the plan computed for lastHandledPlanAt: what
	// the next reconcile would do. The plan in full is in an event.
	// +optional
	LastPlan *PlanStatus `json:"lastPlan,omitempty"`
}

// PlanStatus is the summary of a plan the controller computed on request
// (helm.toolkit.fluxcd.io/planRequestedAt), without acting on it.
type PlanStatus struct {
	// RequestedAt is the annotation's value the plan answers.
	RequestedAt string `json:"requestedAt"`
	// Time is when the plan was computed.
	Time metav1.Time `json:"time"`
	// Action is the next reconcile's step: none, install, upgrade,
	// reinstall, rollback, uninstall, test, unlock, resume or record;
	// empty when the plan failed.
	// +optional
	Action string `json:"action,omitempty"`
	// Summary is the plan in one line, or why it could not be computed.
	Summary string `json:"summary"`
	// Failed says the plan could not be computed; Summary says why.
	// +optional
	Failed bool `json:"failed,omitempty"`
}

// SequenceStatus is the plan of an ordered action.
type SequenceStatus struct {
	// Action is install, upgrade, rollback or uninstall.
	Action string `json:"action"`
	// Batches are the batches in the order they start: each after those
	// it needs (on an uninstall, after those that need it).
	// +optional
	Batches []SequenceBatch `json:"batches,omitempty"`
	// Warnings are the chart's misconfigured ordering annotations, and a
	// subchart order that looks lost in packaging.
	// +optional
	Warnings []string `json:"warnings,omitempty"`
}

// SequenceBatch is one batch of an ordered action.
type SequenceBatch struct {
	// Name is the batch's resource groups ("db", "backend/cache"),
	// "subchart <name>" for a subchart's resources without group, or
	// "unsequenced".
	Name string `json:"name"`
	// Needs are the positions (from 1) of the batches that must be ready
	// before this one is applied.
	// +optional
	Needs []int `json:"needs,omitempty"`
	// Resources is how many objects the batch holds.
	Resources int `json:"resources"`
	// Phase is pending, applying, waiting, ready, applied (not waited
	// for: nothing needs it), failed, deleting, deleted or stuck.
	Phase string `json:"phase"`
	// Detail names, while the batch waits, the object it waits for and
	// why; for a failed or stuck batch, what failed or holds it.
	// +optional
	Detail string `json:"detail,omitempty"`
}

// IsOrdered tells whether spec.waitStrategy asks for an ordered apply.
func (in *HelmRelease) IsOrdered() bool {
	return in.Spec.WaitStrategy != nil && in.Spec.WaitStrategy.Name == WaitStrategyOrdered
}

// Install is upstream's install configuration plus waitStrategy.
// +kubebuilder:validation:XValidation:rule="!(has(self.waitStrategy) && self.waitStrategy == 'afterHooks' && has(self.disableWait) && self.disableWait)",message="waitStrategy afterHooks cannot be combined with disableWait: afterHooks moves the readiness wait after the post hooks, and with the wait disabled there is nothing to move; use waitStrategy beforeHooks or enable the wait"
type Install struct {
	helmv2.Install `json:",inline"`

	// WaitStrategy orders the readiness wait of the install relative to its
	// post-install hooks.
	//
	// beforeHooks (the default) is Helm's order: apply the chart, wait for
	// its resources, then run the post-install hooks.
	//
	// afterHooks runs CRDs (per the CRD policy), pre-install hooks, applies
	// the chart, runs the post-install hooks and only then waits for the
	// resources to become ready. Use it for charts whose workloads need
	// something a post-install hook creates. The release stays
	// pending-install in Helm storage until the wait passes; a failed wait
	// fails the release and remediates like any failed install.
	// Cannot be combined with disableWait.
	// +optional
	WaitStrategy HookWaitStrategy `json:"waitStrategy,omitempty"`
}

// Upgrade is upstream's upgrade configuration plus waitStrategy.
// +kubebuilder:validation:XValidation:rule="!(has(self.waitStrategy) && self.waitStrategy == 'afterHooks' && has(self.disableWait) && self.disableWait)",message="waitStrategy afterHooks cannot be combined with disableWait: afterHooks moves the readiness wait after the post hooks, and with the wait disabled there is nothing to move; use waitStrategy beforeHooks or enable the wait"
type Upgrade struct {
	helmv2.Upgrade `json:",inline"`

	// WaitStrategy orders the readiness wait of the upgrade relative to its
	// post-upgrade hooks.
	//
	// beforeHooks (the default) is Helm's order: apply the new revision,
	// wait for its resources, then run the post-upgrade hooks.
	//
	// afterHooks runs CRDs (per the CRD policy), pre-upgrade hooks, applies
	// the new revision, runs the post-upgrade hooks and only then waits for
	// the resources to become ready. The new revision stays pending-upgrade
	// in Helm storage until the wait passes; a failed wait fails the release
	// and remediates (for example by rolling back) like any failed upgrade.
	// Cannot be combined with disableWait.
	// +optional
	WaitStrategy HookWaitStrategy `json:"waitStrategy,omitempty"`
}

// Rollback is upstream's rollback configuration plus waitStrategy.
// +kubebuilder:validation:XValidation:rule="!(has(self.waitStrategy) && self.waitStrategy == 'afterHooks' && has(self.disableWait) && self.disableWait)",message="waitStrategy afterHooks cannot be combined with disableWait: afterHooks moves the readiness wait after the post hooks, and with the wait disabled there is nothing to move; use waitStrategy beforeHooks or enable the wait"
type Rollback struct {
	helmv2.Rollback `json:",inline"`

	// WaitStrategy orders the readiness wait of the rollback relative to
	// its post-rollback hooks.
	//
	// beforeHooks (the default) is Helm's order: restore the previous
	// revision, wait for its resources, then run the post-rollback hooks.
	//
	// afterHooks runs pre-rollback hooks, restores the previous revision,
	// runs the post-rollback hooks and only then waits for the resources to
	// become ready. The rollback stays pending-rollback in Helm storage until
	// the wait passes. Cannot be combined with disableWait.
	// +optional
	WaitStrategy HookWaitStrategy `json:"waitStrategy,omitempty"`
}

// Uninstall is upstream's uninstall configuration plus deleteHookResources.
type Uninstall struct {
	helmv2.Uninstall `json:",inline"`

	// DeleteHookResources deletes, after the uninstall, the objects the
	// release's hooks created and left in the cluster: hooks are not part
	// of a Helm release, so Helm's uninstall leaves every hook object that
	// no helm.sh/hook-delete-policy removed (Completed Jobs and their pods,
	// ConfigMaps, ServiceAccounts...). With it, the controller marks each
	// hook object it creates with the annotation
	// helm.toolkit.fluxcd.io/hook-release (storage namespace/release name),
	// and on uninstall deletes, among the objects named by the hooks of any
	// stored revision (the pre- and post-delete hooks the uninstall just ran
	// included), only hook objects with this release's mark, and only of
	// the kinds that hold no data: Jobs, Pods, ServiceAccounts, Roles,
	// RoleBindings, ClusterRoles and ClusterRoleBindings, plus those listed
	// in deleteHookResourceKinds. Never deleted: Namespaces,
	// PersistentVolumeClaims, PersistentVolumes, CustomResourceDefinitions
	// and objects with helm.sh/resource-policy: keep; objects left are
	// named in a HookResourcesLeft event. Jobs are deleted with background
	// propagation, so their pods go too. The deletions are waited for as the
	// uninstall waits for its own (not with disableWait), within what is
	// left of the uninstall timeout. The release records are kept until the
	// cleanup is over, so a restarted controller finishes it. A failure is
	// reported in a HookCleanupFailed warning event; the uninstall itself
	// succeeded. Defaults to false: Helm's behaviour.
	// +optional
	DeleteHookResources bool `json:"deleteHookResources,omitempty"`

	// DeleteHookResourceKinds lists more kinds of hook objects for
	// deleteHookResources to delete, beyond Jobs, Pods, ServiceAccounts and
	// RBAC: each "Kind" for the core group (Secret, ConfigMap) or
	// "Kind.group" (Certificate.cert-manager.io), or "*" for every kind.
	// Those kinds are left by default because they may hold data the
	// release needs back: a hook's Secret may hold a generated password
	// the chart reads back with lookup, whose PersistentVolumeClaims
	// outlive the uninstall; a custom resource's operator may delete
	// storage with it. The never-deleted kinds and keep stay out of reach
	// whatever is listed. Has no effect without deleteHookResources.
	// +optional
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:Pattern=`^(\*|[A-Za-z][A-Za-z0-9]*(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*)$`
	DeleteHookResourceKinds []string `json:"deleteHookResourceKinds,omitempty"`
}

// GetWaitStrategy returns the strategy for the install, falling back to
// defaultStrategy when unset. With the wait disabled there is no wait to
// order, so the result is always BeforeHooks.
func (in Install) GetWaitStrategy(defaultStrategy HookWaitStrategy) HookWaitStrategy {
	return effectiveWaitStrategy(in.WaitStrategy, defaultStrategy, in.DisableWait)
}

// GetWaitStrategy returns the strategy for the upgrade; see Install.GetWaitStrategy.
func (in Upgrade) GetWaitStrategy(defaultStrategy HookWaitStrategy) HookWaitStrategy {
	return effectiveWaitStrategy(in.WaitStrategy, defaultStrategy, in.DisableWait)
}

// GetWaitStrategy returns the strategy for the rollback; see Install.GetWaitStrategy.
func (in Rollback) GetWaitStrategy(defaultStrategy HookWaitStrategy) HookWaitStrategy {
	return effectiveWaitStrategy(in.WaitStrategy, defaultStrategy, in.DisableWait)
}

func effectiveWaitStrategy(set, defaultStrategy HookWaitStrategy, disableWait bool) HookWaitStrategy {
	if disableWait {
		return BeforeHooks
	}
	if set != "" {
		return set
	}
	if defaultStrategy != "" {
		return defaultStrategy
	}
	return BeforeHooks
}

// +kubebuilder:object:root=true
// +kubebuilder:resource:shortName=hr,categories=all;fluxcd;fluxcd-appliers
// +kubebuilder:storageversion
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp",description=""
// +kubebuilder:printcolumn:name="Ready",type="string",JSONPath=".status.conditions[?(@.type==\"Ready\")].status",description=""
// +kubebuilder:printcolumn:name="Status",type="string",JSONPath=".status.conditions[?(@.type==\"Ready\")].message",description=""
// +kubebuilder:metadata:annotations="kustomize.toolkit.fluxcd.io/substitute=disabled"

// HelmRelease is the Schema for the helmreleases API
type HelmRelease struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec HelmReleaseSpec `json:"spec,omitempty"`
	// +kubebuilder:default:={"observedGeneration":-1}
	Status HelmReleaseStatus `json:"status,omitempty"`
}

// GetInstall returns the install configuration, the zero value when unset.
func (in *HelmRelease) GetInstall() Install {
	if in.Spec.Install == nil {
		return Install{}
	}
	return *in.Spec.Install
}

// GetUpgrade returns the upgrade configuration, the zero value when unset.
func (in *HelmRelease) GetUpgrade() Upgrade {
	if in.Spec.Upgrade == nil {
		return Upgrade{}
	}
	return *in.Spec.Upgrade
}

// GetRollback returns the rollback configuration, the zero value when unset.
func (in *HelmRelease) GetRollback() Rollback {
	if in.Spec.Rollback == nil {
		return Rollback{}
	}
	return *in.Spec.Rollback
}

// GetUninstall returns the uninstall configuration, the zero value when unset.
func (in *HelmRelease) GetUninstall() Uninstall {
	if in.Spec.Uninstall == nil {
		return Uninstall{}
	}
	return *in.Spec.Uninstall
}

// GetConditions returns the status conditions of the object.
func (in *HelmRelease) GetConditions() []metav1.Condition {
	return in.Status.Conditions
}

// SetConditions sets the status conditions on the object.
func (in *HelmRelease) SetConditions(conditions []metav1.Condition) {
	in.Status.Conditions = conditions
}

// GetRequeueAfter returns the interval at which the object is reconciled.
func (in *HelmRelease) GetRequeueAfter() time.Duration {
	return in.Spec.Interval.Duration
}

// GetLastHandledReconcileRequest returns the last handled reconcile request.
func (in *HelmRelease) GetLastHandledReconcileRequest() string {
	return in.Status.GetLastHandledReconcileRequest()
}

// GetHelmChartTemplateReference names the source object the controller
// makes from spec.chart, as upstream names it: kind HelmChart unless the
// template asks for an OCIRepository, name "<namespace>-<name>" of the
// HelmRelease, in the HelmRelease's namespace, or for a HelmChart in the
// namespace of its sourceRef when that names one. Nil without a template.
func (in *HelmRelease) GetHelmChartTemplateReference() *helmv2.HelmChartReference {
	if in == nil || in.Spec.Chart == nil {
		return nil
	}
	tpl := in.Spec.Chart
	ref := &helmv2.HelmChartReference{
		Kind:      tpl.Kind,
		Namespace: in.Namespace,
		Name:      in.Namespace + "-" + in.Name,
	}
	if ref.Kind == "" {
		ref.Kind = sourcev1.HelmChartKind
	}
	if ref.Kind == sourcev1.HelmChartKind && tpl.Spec.SourceRef != nil && tpl.Spec.SourceRef.Namespace != "" {
		ref.Namespace = tpl.Spec.SourceRef.Namespace
	}
	return ref
}

// GetTemplateInterval is how often the object made from the chart
// template is reconciled: the template's interval, else spec.interval.
func (in *HelmRelease) GetTemplateInterval() metav1.Duration {
	if in.Spec.Chart == nil || in.Spec.Chart.Spec.Interval == nil {
		return in.Spec.Interval
	}
	return *in.Spec.Chart.Spec.Interval
}

// +kubebuilder:object:root=true

// HelmReleaseList contains a list of HelmRelease objects.
type HelmReleaseList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []HelmRelease `json:"items"`
}

func init() {
	SchemeBuilder.Register(&HelmRelease{}, &HelmReleaseList{})
}
