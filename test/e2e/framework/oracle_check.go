package framework

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/fluxcd/cli-utils/pkg/kstatus/status"
	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	"github.com/fluxcd/pkg/apis/meta"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	v2 "github.com/afterhooks/helm-controller/api/v2"
)

// This file is the oracle's judgement, kept apart from the watches that
// feed it (oracle.go) so that it runs on recorded histories without a
// cluster.
//
// Order: every observation carries its resourceVersion as an integer. The
// test cluster has one etcd, whose revision is the resourceVersion of
// every object and every deletion, so it orders changes across kinds
// (Kubernetes documents such versions as comparable since 1.34). "As of" a
// Ready=True transition means every state with an order up to the
// transition's: what the controller could have seen when it wrote Ready.

// Observation is one state of an object as its watch delivered it.
type Observation struct {
	// Order is the object's resourceVersion as an integer; for a deletion,
	// the revision of the deletion.
	Order uint64
	// Seen is when the oracle received it.
	Seen time.Time
	// Object is the object's state; for a deletion, its last state.
	Object *unstructured.Unstructured
	// Deleted marks the deletion.
	Deleted bool
}

// ObjectHistory is every observed state of one object (one uid), oldest
// first, its deletion included.
type ObjectHistory struct {
	Kind string
	// Listed is true when the object existed before the recording
	// started: its first state is not its creation.
	Listed bool
	States []Observation
}

// Created is the order of the object's creation, 0 when it existed before
// the recording started.
func (h *ObjectHistory) Created() uint64 {
	if h.Listed || len(h.States) == 0 {
		return 0
	}
	return h.States[0].Order
}

// asOf returns the object's states up to order, and whether it was deleted
// by then.
func (h *ObjectHistory) asOf(order uint64) (states []Observation, deleted bool) {
	for _, s := range h.States {
		if s.Order > order {
			break
		}
		states = append(states, s)
		deleted = deleted || s.Deleted
	}
	return states, deleted
}

func (h *ObjectHistory) describe() string {
	if len(h.States) == 0 {
		return h.Kind
	}
	o := h.States[0].Object
	return fmt.Sprintf("%s/%s/%s", h.Kind, o.GetNamespace(), o.GetName())
}

// Recording is what the oracle recorded in one namespace.
type Recording struct {
	// Releases are the HelmReleases' histories.
	Releases []*ObjectHistory
	// Objects are the histories of the Jobs, Pods, Deployments,
	// StatefulSets and DaemonSets.
	Objects []*ObjectHistory
	// Storage are the histories of Helm's release records in the
	// namespace: the storage Secrets (label owner=helm), without their
	// data. Helm stores a revision's record when an install, upgrade or
	// rollback starts, whoever runs it (the controller or helm by hand),
	// so their creations divide the recording into actions.
	Storage []*ObjectHistory
}

// HookRef is a hook as Helm recorded it in a revision.
type HookRef struct {
	Kind, Name string
	// Events are the hook's helm.sh/hook events (post-install, ...).
	Events []string
}

// HookSource returns the hooks Helm stored for revision of the release
// releaseName in storage namespace ns.
type HookSource func(ns, releaseName string, revision int) ([]HookRef, error)

// Lie is a Ready=True that the cluster contradicts.
type Lie struct {
	// Release is namespace/name of the HelmRelease.
	Release string
	// Revision is the Helm revision Ready named; 0 when none.
	Revision int
	// Object is Kind/namespace/name of the object that contradicts it,
	// empty when it is the HelmRelease itself.
	Object string
	// Problem says what was wrong.
	Problem string
}

func (l Lie) String() string {
	what := l.Problem
	if l.Object != "" {
		what = l.Object + ": " + l.Problem
	}
	return fmt.Sprintf("oracle: HelmRelease %s Ready=True at revision %d, but %s", l.Release, l.Revision, what)
}

// Transition is a state in which a HelmRelease turned Ready=True, or in
// which the controller wrote a new Ready=True over an old one.
type Transition struct {
	Release *ObjectHistory
	Index   int
}

// releaseState is one decoded state of a HelmRelease.
type releaseState struct {
	Observation
	hr *v2.HelmRelease
}

func decodeReleaseStates(h *ObjectHistory) ([]releaseState, error) {
	out := make([]releaseState, 0, len(h.States))
	for _, s := range h.States {
		hr := &v2.HelmRelease{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(s.Object.Object, hr); err != nil {
			return nil, fmt.Errorf("decoding HelmRelease %s at %d: %w", s.Object.GetName(), s.Order, err)
		}
		out = append(out, releaseState{Observation: s, hr: hr})
	}
	return out, nil
}

func readyCondition(hr *v2.HelmRelease) *metav1.Condition {
	return apimeta.FindStatusCondition(hr.Status.Conditions, meta.ReadyCondition)
}

func isReadyTrue(s releaseState) bool {
	c := readyCondition(s.hr)
	return !s.Deleted && c != nil && c.Status == metav1.ConditionTrue
}

// ReadyTransitions returns the indexes of h's states that write a new
// Ready=True: from another status, or a Ready=True whose reason, message,
// observed generation or transition time changed.
func ReadyTransitions(h *ObjectHistory) ([]int, error) {
	states, err := decodeReleaseStates(h)
	if err != nil {
		return nil, err
	}
	return readyTransitions(states), nil
}

func readyTransitions(states []releaseState) []int {
	var out []int
	for i, s := range states {
		if !isReadyTrue(s) {
			continue
		}
		if i == 0 || !isReadyTrue(states[i-1]) || newReadyWrite(readyCondition(states[i-1].hr), readyCondition(s.hr)) {
			out = append(out, i)
		}
	}
	return out
}

func newReadyWrite(before, after *metav1.Condition) bool {
	return before.Reason != after.Reason || before.Message != after.Message ||
		before.ObservedGeneration != after.ObservedGeneration || !before.LastTransitionTime.Equal(&after.LastTransitionTime)
}

// CheckTransition judges the Ready=True at index idx of hr against the
// recording and returns the lies. hooks may be nil: then the post hooks are
// judged by the objects seen only, not against what Helm stored.
func CheckTransition(rec *Recording, hr *ObjectHistory, idx int, hooks HookSource) []Lie {
	return Judge(rec, hr, idx, hooks).Lies
}

// Verdict is the judgement of one Ready=True.
type Verdict struct {
	Lies []Lie
	// Revision is the revision Ready named, Action the Helm action that
	// led to it (empty when none ran since the previous Ready=True).
	Revision int
	Action   string
	// Judged names the objects the Ready was held to.
	Judged []string
}

// Judge is CheckTransition with what was judged.
func Judge(rec *Recording, hr *ObjectHistory, idx int, hooks HookSource) Verdict {
	states, err := decodeReleaseStates(hr)
	if err != nil {
		return Verdict{Lies: []Lie{{Release: hr.describe(), Problem: err.Error()}}}
	}
	c := &check{rec: rec, hist: hr, states: states, idx: idx, hooks: hooks}
	c.settle()
	c.checkGeneration()
	if c.action != nil {
		c.checkJobs()
		c.checkHooks()
	}
	// Without an action since the previous Ready, this is a reconcile that
	// found the release in sync: its workloads must still be ready.
	c.checkWorkloads()
	v := Verdict{Lies: c.lies, Revision: c.revision(), Judged: c.judged}
	if c.action != nil {
		v.Action = c.action.verb
	}
	return v
}

// check is the judgement of one transition.
type check struct {
	rec *Recording
	// hist is the HelmRelease's own history, its deletion included.
	hist   *ObjectHistory
	states []releaseState
	idx    int
	hooks  HookSource
	// settled is the transition's state once the status written with it
	// landed: the controller writes conditions in one request and the
	// rest of the status in a second.
	settled releaseState
	// action is where the action that led to this Ready began: nil when
	// none ran since the previous Ready=True (the same revision).
	action *window
	lies   []Lie
	judged []string
}

// window is the span of orders in which the action's objects were created.
type window struct {
	from, to uint64
	verb     string
	// since is the order of the previous Ready=True, 0 without one: a hook
	// of the revision may have run before the window opened, when a
	// restart or a transient error of the controller wrote a Ready=False
	// in the middle of the action.
	since uint64
}

func (c *check) at() releaseState { return c.states[c.idx] }

func (c *check) name() string {
	hr := c.at().hr
	return hr.Namespace + "/" + hr.Name
}

func (c *check) revision() int {
	return revisionOf(c.settled.hr)
}

func (c *check) lie(object, format string, args ...any) {
	c.lies = append(c.lies, Lie{Release: c.name(), Revision: c.revision(), Object: object, Problem: fmt.Sprintf(format, args...)})
}

// settle finds the settled state: the first state of the same Ready=True
// write, at the same generation, whose status.observedGeneration reached
// the generation Ready names; the last such state when none did. It then
// finds the action window.
func (c *check) settle() {
	start := c.at()
	named := readyCondition(start.hr).ObservedGeneration
	c.settled = start
	for k := c.idx; k < len(c.states); k++ {
		s := c.states[k]
		if !isReadyTrue(s) || s.hr.Generation != start.hr.Generation ||
			(k > c.idx && newReadyWrite(readyCondition(c.states[k-1].hr), readyCondition(s.hr))) {
			break
		}
		c.settled = s
		if s.hr.Status.ObservedGeneration >= named {
			break
		}
	}
	c.action = c.actionWindow()
}

// completedLater tells whether a state after the transition, at the same
// generation, carries the status.observedGeneration its Ready names: the
// status write cut short was finished by a later reconcile.
func (c *check) completedLater() bool {
	start := c.at().hr
	named := readyCondition(start).ObservedGeneration
	for _, s := range c.states[c.idx+1:] {
		if s.hr.Generation != start.Generation {
			return false
		}
		if s.hr.Status.ObservedGeneration >= named {
			return true
		}
	}
	return false
}

// checkGeneration: Ready names the generation the status says was
// observed, and that is the object's generation, unless the spec changed
// while the controller was already writing (it never showed that it had
// seen the newer generation before it wrote Ready).
func (c *check) checkGeneration() {
	start := c.at()
	named := readyCondition(start.hr).ObservedGeneration
	// The controller writes the conditions and the rest of the status in
	// two requests; a release deleted after the first (a stop of the
	// controller in between, then the uninstall) never gets the second,
	// and a controller stopped in between leaves it to the next one.
	observed := c.settled.hr.Status.ObservedGeneration
	cutShort := observed < named && (c.releaseDeletedLater() || c.completedLater())
	if observed != named && !cutShort {
		c.lie("", "the Ready condition is for generation %d while status.observedGeneration is %d", named, observed)
	}
	generation := start.hr.Generation
	if named >= generation {
		return
	}
	if k, ok := c.controllerSaw(generation); ok {
		c.lie("", "it names generation %d of generation %d, which the controller had already started on (its status at resourceVersion %d)",
			named, generation, c.states[k].Order)
	}
}

// controllerSaw returns the first state before the transition in which the
// controller's status shows it had read generation.
func (c *check) controllerSaw(generation int64) (int, bool) {
	for k := c.idx - 1; k >= 0; k-- {
		s := c.states[k]
		if s.hr.Generation < generation {
			break
		}
		if s.hr.Status.LastAttemptedGeneration >= generation {
			return k, true
		}
		for _, cond := range s.hr.Status.Conditions {
			if cond.ObservedGeneration >= generation {
				return k, true
			}
		}
	}
	return 0, false
}

// actionWindow is the rule that ties objects to the revision Ready names:
// an object belongs to the action if it was created after the action was
// announced and no later than the transition. The announcement is the
// first state whose Reconciling condition says "Running '<action>' action
// ..." after the last Ready=False (a failed attempt, retried) or, without
// one, after the previous Ready=True; the first, so that a controller
// restarted in the middle of the action, which announces it again, keeps
// the hooks that ran before the restart. Without an announcement the
// window opens at that Ready=False or previous Ready=True. An action ran
// only if the revision named changed since the previous Ready=True (or
// there was none): else the Ready is a check that found the release in
// sync, and no Job or hook of it is judged.
func (c *check) actionWindow() *window {
	prev := -1
	for _, k := range readyTransitions(c.states[:c.idx]) {
		prev = k
	}
	if prev >= 0 && c.revisionNamedAt(prev) == c.revision() {
		return nil
	}
	w := &window{to: c.at().Order, verb: c.actionVerb()}
	if prev >= 0 {
		w.since = c.states[prev].Order
	}
	opened := prev
	for k := c.idx - 1; k > prev; k-- {
		if ready := readyCondition(c.states[k].hr); ready != nil && ready.Status == metav1.ConditionFalse {
			opened = k
			break
		}
	}
	if opened >= 0 {
		w.from = c.states[opened].Order
	}
	for k := opened + 1; k < c.idx; k++ {
		if strings.HasPrefix(reconcilingMessage(c.states[k].hr), "Running '") {
			w.from = c.states[k].Order
			break
		}
	}
	return w
}

// revisionNamedAt is the revision of the Ready=True written at index k,
// read from the last state of that write: the history comes with the
// status request after the conditions.
func (c *check) revisionNamedAt(k int) int {
	rev := revisionOf(c.states[k].hr)
	for j := k + 1; j < c.idx && isReadyTrue(c.states[j]) &&
		!newReadyWrite(readyCondition(c.states[j-1].hr), readyCondition(c.states[j].hr)); j++ {
		rev = revisionOf(c.states[j].hr)
	}
	return rev
}

// revisionOf is the revision a state of the HelmRelease names: the latest
// snapshot of its history, or the later revision its Ready message names.
// The message comes with the conditions, the history with the second
// status request; a controller stopped between the two leaves a Ready=True
// whose history is one action behind, and the next controller writes
// Ready=True again for the same revision.
func revisionOf(hr *v2.HelmRelease) int {
	rev := 0
	if latest := hr.Status.History.Latest(); latest != nil {
		rev = latest.Version
	}
	if ready := readyCondition(hr); ready != nil && ready.Status == metav1.ConditionTrue {
		rev = max(rev, messageRevision(ready.Message))
	}
	return rev
}

// releaseInMessage finds the revision in the controller's messages, which
// name a release as <namespace>/<name>.v<revision>.
var releaseInMessage = regexp.MustCompile(`for release \S+\.v(\d+)\b`)

func messageRevision(message string) int {
	m := releaseInMessage.FindStringSubmatch(message)
	if m == nil {
		return 0
	}
	rev, err := strconv.Atoi(m[1])
	if err != nil {
		return 0
	}
	return rev
}

func reconcilingMessage(hr *v2.HelmRelease) string {
	if r := apimeta.FindStatusCondition(hr.Status.Conditions, meta.ReconcilingCondition); r != nil && r.Status == metav1.ConditionTrue {
		return r.Message
	}
	return ""
}

// actionVerb is the Helm action whose outcome Ready reports: the latest
// snapshot's, else the Ready reason's.
func (c *check) actionVerb() string {
	if latest := c.settled.hr.Status.History.Latest(); latest != nil && latest.Action != "" {
		return string(latest.Action)
	}
	switch readyCondition(c.at().hr).Reason {
	case helmv2.InstallSucceededReason:
		return "install"
	case helmv2.UpgradeSucceededReason:
		return "upgrade"
	}
	return ""
}

// waits returns whether the action waited for readiness and for Jobs. A
// release that opts out of the wait (upstream's documented behaviour) is
// only held to its hooks and its generation.
func (c *check) waits() (resources, jobs bool) {
	spec := c.at().hr.Spec
	var disableWait, disableJobs bool
	switch verb := c.actionVerb(); {
	case verb == "install" && spec.Install != nil:
		disableWait, disableJobs = spec.Install.DisableWait, spec.Install.DisableWaitForJobs
	case verb == "upgrade" && spec.Upgrade != nil:
		disableWait, disableJobs = spec.Upgrade.DisableWait, spec.Upgrade.DisableWaitForJobs
	case verb == "rollback" && spec.Rollback != nil:
		disableWait, disableJobs = spec.Rollback.DisableWait, spec.Rollback.DisableWaitForJobs
	case verb == "":
		// Unknown action: exempt if any action opts out.
		disableWait = (spec.Install != nil && spec.Install.DisableWait) || (spec.Upgrade != nil && spec.Upgrade.DisableWait)
		disableJobs = (spec.Install != nil && spec.Install.DisableWaitForJobs) || (spec.Upgrade != nil && spec.Upgrade.DisableWaitForJobs)
	}
	return !disableWait, !disableWait && !disableJobs
}

// Labels and annotations that tie an object to a release.
const (
	originNameLabel       = "helm.toolkit.fluxcd.io/name"
	originNamespaceLabel  = "helm.toolkit.fluxcd.io/namespace"
	releaseNameAnnotation = "meta.helm.sh/release-name"
	releaseNSAnnotation   = "meta.helm.sh/release-namespace"
	hookAnnotation        = "helm.sh/hook"
)

// belongs says whether obj is the release's: by the origin labels the
// controller's post renderer puts on every object, hooks included; else by
// the ownership annotations Helm puts on the objects it applies; else, for
// a hook without either, by being a hook in the namespace (Helm marks
// hooks with neither).
func (c *check) belongs(obj *unstructured.Unstructured) bool {
	hr := c.at().hr
	labels, annotations := obj.GetLabels(), obj.GetAnnotations()
	if name, ok := labels[originNameLabel]; ok {
		return name == hr.Name && labels[originNamespaceLabel] == hr.Namespace
	}
	if name, ok := annotations[releaseNameAnnotation]; ok {
		return name == v2.ReleaseName(hr) && annotations[releaseNSAnnotation] == hr.GetReleaseNamespace()
	}
	_, hook := annotations[hookAnnotation]
	return hook
}

// hookEvents returns the helm.sh/hook events of obj.
func hookEvents(obj *unstructured.Unstructured) []string {
	value, ok := obj.GetAnnotations()[hookAnnotation]
	if !ok {
		return nil
	}
	var out []string
	for _, e := range strings.Split(value, ",") {
		out = append(out, strings.TrimSpace(e))
	}
	return out
}

// actionHook says whether a hook with events runs in the action verb
// (pre-/post-<verb>): test and delete hooks are not part of it.
func actionHook(events []string, verb string) bool {
	return slices.Contains(events, "pre-"+verb) || slices.Contains(events, "post-"+verb)
}

func postHook(events []string, verb string) bool {
	return slices.Contains(events, "post-"+verb)
}

// inAction returns the object's states as of the transition when it was
// created in the action window.
func (c *check) inAction(h *ObjectHistory) ([]Observation, bool) {
	created := h.Created()
	if c.action == nil || created == 0 || created <= c.action.from || created > c.action.to || c.replaced(h) {
		return nil, false
	}
	states, _ := h.asOf(c.action.to)
	return states, len(states) > 0 && c.belongs(states[0].Object)
}

// replaced tells whether a later object of the same kind, namespace and
// name was created within the action window: the action's result is the
// last one. Helm deletes a hook before creating it again
// (before-hook-creation), and a retried action after a restart of the
// controller runs the hooks of the interrupted one again; the earlier
// object was cut short by Helm, not a result of the revision.
func (c *check) replaced(h *ObjectHistory) bool {
	return createdAgain(c.rec, h, c.action.to)
}

// releaseDeletedLater tells whether the HelmRelease was deleted (or marked
// for deletion) after the transition being judged: its uninstall may have
// removed the revision from Helm storage before the judgement read it.
func (c *check) releaseDeletedLater() bool {
	for _, s := range c.states[c.idx:] {
		if s.hr.DeletionTimestamp != nil {
			return true
		}
	}
	if c.hist != nil && len(c.hist.States) > 0 {
		return c.hist.States[len(c.hist.States)-1].Deleted
	}
	return false
}

// checkJobs: every Job the action created, hook or not, never failed and,
// unless the release does not wait for Jobs, completed by the transition.
// Hook Jobs are held to it always: Helm waits for every hook.
func (c *check) checkJobs() {
	_, waitJobs := c.waits()
	for _, h := range c.rec.Objects {
		if h.Kind != "Job" {
			continue
		}
		states, ok := c.inAction(h)
		if !ok {
			continue
		}
		events := hookEvents(states[0].Object)
		isHook := events != nil
		if isHook && !actionHook(events, c.action.verb) {
			continue
		}
		if !isHook && !waitJobs {
			continue
		}
		c.judgeRun(h, states, "Job")
	}
}

// judgeRun holds a Job or a bare Pod to having finished well by the
// transition, and says how it was seen otherwise.
func (c *check) judgeRun(h *ObjectHistory, states []Observation, kind string) {
	c.judged = append(c.judged, h.describe())
	complete := false
	for _, s := range states {
		done, failed, why := runOutcome(s.Object)
		if failed {
			gone := ""
			if _, deleted := h.asOf(c.action.to); deleted {
				gone = ", and was deleted before Ready"
			}
			c.lie(h.describe(), "the %s failed at resourceVersion %d (%s)%s", kind, s.Order, why, gone)
			return
		}
		complete = complete || done
	}
	if !complete {
		last := states[len(states)-1]
		state := "still running"
		if last.Deleted {
			state = "deleted before it completed"
		}
		c.lie(h.describe(), "the %s created by the %s had not completed: %s", kind, c.action.verb, state)
	}
}

// runOutcome reads a Job's conditions or a Pod's phase.
func runOutcome(obj *unstructured.Unstructured) (complete, failed bool, why string) {
	if obj.GetKind() == "Pod" {
		phase, _, _ := unstructured.NestedString(obj.Object, "status", "phase")
		return phase == "Succeeded", phase == "Failed", "phase " + phase
	}
	conds, _, _ := unstructured.NestedSlice(obj.Object, "status", "conditions")
	for _, raw := range conds {
		cond, _ := raw.(map[string]any)
		if cond["status"] != "True" {
			continue
		}
		switch cond["type"] {
		case "Complete", "SuccessCriteriaMet":
			complete = true
		case "Failed", "FailureTarget":
			failed = true
			why = fmt.Sprintf("%s: %v %v", cond["type"], cond["reason"], cond["message"])
		}
	}
	return complete, failed, why
}

// checkHooks: every post hook of the action ran and succeeded. Jobs were
// judged by checkJobs; this adds bare hook Pods, and the hooks Helm stored
// for the revision that never showed up at all.
func (c *check) checkHooks() {
	seen := map[string]bool{}
	for _, h := range c.rec.Objects {
		if h.Kind != "Job" && h.Kind != "Pod" {
			continue
		}
		states, ok := c.inAction(h)
		if !ok {
			continue
		}
		obj := states[0].Object
		events := hookEvents(obj)
		if !actionHook(events, c.action.verb) || (h.Kind == "Pod" && len(obj.GetOwnerReferences()) > 0) {
			continue
		}
		seen[h.Kind+"/"+obj.GetName()] = true
		if h.Kind == "Pod" {
			c.judgeRun(h, states, "hook Pod")
		}
	}
	c.checkStoredHooks(seen)
}

func (c *check) checkStoredHooks(seen map[string]bool) {
	hr := c.at().hr
	// The oracle watches the HelmRelease's namespace on its cluster: hooks
	// Helm applies into a target namespace elsewhere, or into a remote
	// cluster (kubeConfig), are out of its sight.
	if c.hooks == nil || c.revision() == 0 || hr.GetReleaseNamespace() != hr.Namespace || hr.Spec.KubeConfig != nil {
		return
	}
	stored, err := c.hooks(hr.GetStorageNamespace(), v2.ReleaseName(hr), c.revision())
	if err != nil {
		if c.releaseDeletedLater() || c.targetMovedLater() {
			return // uninstalled before the judgement: nothing left to read
		}
		c.lie("", "the oracle could not read the revision's hooks: %v", err)
		return
	}
	for _, hook := range stored {
		if (hook.Kind != "Job" && hook.Kind != "Pod") || !postHook(hook.Events, c.action.verb) {
			continue
		}
		if !seen[hook.Kind+"/"+hook.Name] && !c.ranBeforeWindow(hook) {
			c.lie(fmt.Sprintf("%s/%s/%s", hook.Kind, hr.GetReleaseNamespace(), hook.Name),
				"the %s hook of the revision never ran (no such object was created during the %s)", strings.Join(hook.Events, ","), c.action.verb)
		}
	}
}

// ranBeforeWindow judges the last run of hook created after the previous
// Ready=True but before the action window opened, and tells whether there
// was one.
func (c *check) ranBeforeWindow(hook HookRef) bool {
	var last *ObjectHistory
	for _, h := range c.rec.Objects {
		created := h.Created()
		if h.Kind != hook.Kind || len(h.States) == 0 || h.States[0].Object.GetName() != hook.Name ||
			created == 0 || created <= c.action.since || created > c.action.from {
			continue
		}
		if last == nil || created > last.Created() {
			last = h
		}
	}
	if last == nil {
		return false
	}
	if states, _ := last.asOf(c.action.to); len(states) > 0 && c.belongs(states[0].Object) {
		c.judgeRun(last, states, "hook "+hook.Kind)
		return true
	}
	return false
}

// targetMovedLater tells whether a later state of the HelmRelease names
// another Helm release (releaseName, targetNamespace, storageNamespace):
// the controller uninstalled the old one, whose records are gone.
func (c *check) targetMovedLater() bool {
	hr := c.at().hr
	for _, s := range c.states[c.idx:] {
		if v2.ReleaseName(s.hr) != v2.ReleaseName(hr) || s.hr.GetStorageNamespace() != hr.GetStorageNamespace() {
			return true
		}
	}
	return false
}

// checkWorkloads: every Deployment, StatefulSet and DaemonSet of the
// release that exists as of the transition is Current by kstatus in its
// latest state then.
func (c *check) checkWorkloads() {
	if waitResources, _ := c.waits(); !waitResources {
		return
	}
	for _, h := range c.rec.Objects {
		if h.Kind != "Deployment" && h.Kind != "StatefulSet" && h.Kind != "DaemonSet" {
			continue
		}
		states, deleted := h.asOf(c.at().Order)
		if len(states) == 0 || deleted {
			continue
		}
		last := states[len(states)-1].Object
		if last.GetDeletionTimestamp() != nil || !c.belongs(last) {
			continue
		}
		c.judged = append(c.judged, h.describe())
		res, err := status.Compute(last)
		if err != nil {
			c.lie(h.describe(), "kstatus cannot read it: %v", err)
			continue
		}
		if res.Status != status.CurrentStatus {
			c.lie(h.describe(), "it was %s (%s) at resourceVersion %s", res.Status, res.Message, last.GetResourceVersion())
		}
	}
}

// uidOf names a history for bookkeeping.
func uidOf(h *ObjectHistory) types.UID {
	if len(h.States) == 0 {
		return ""
	}
	return h.States[0].Object.GetUID()
}
