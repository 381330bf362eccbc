package framework

import (
	"fmt"
	"strings"
	"testing"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	"github.com/fluxcd/pkg/apis/meta"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	v2 "github.com/afterhooks/helm-controller/api/v2"
)

// The histories below are what the oracle records for the jobs-ttl chart
// (a Deployment, an ordinary Job and a post-install/post-upgrade hook Job,
// both Jobs with ttlSecondsAfterFinished: 0) installed as release "ttl" in
// namespace "ns", with the controller's two-request status writes.

const (
	oracleNS         = "ns"
	oracleRelease    = "ttl"
	installAnnounce  = "Running 'install' action with timeout of 30s"
	upgradeAnnounce  = "Running 'upgrade' action with timeout of 30s"
	installSucceeded = "Helm install succeeded for release ns/ttl.v1 with chart jobs-ttl@0.1.0"
	upgradeSucceeded = "Helm upgrade succeeded for release ns/ttl.v2 with chart jobs-ttl@0.1.0"
)

// hrAt describes one state of the HelmRelease.
type hrAt struct {
	order              uint64
	generation         int64
	observedGeneration int64
	ready              metav1.ConditionStatus // empty: no Ready condition
	reason, message    string
	readyGeneration    int64
	reconciling        string // Reconciling=True message, empty: none
	revisions          int    // snapshots in the history, newest last
	disableWait        bool
}

func (s hrAt) object(t *testing.T) *unstructured.Unstructured {
	t.Helper()
	hr := &v2.HelmRelease{
		TypeMeta:   metav1.TypeMeta{APIVersion: "helm.toolkit.fluxcd.io/v2", Kind: "HelmRelease"},
		ObjectMeta: metav1.ObjectMeta{Namespace: oracleNS, Name: oracleRelease, UID: "hr", Generation: s.generation},
	}
	if s.disableWait {
		hr.Spec.Install = &v2.Install{Install: helmv2.Install{DisableWait: true}}
		hr.Spec.Upgrade = &v2.Upgrade{Upgrade: helmv2.Upgrade{DisableWait: true}}
	}
	hr.Status.ObservedGeneration = s.observedGeneration
	if s.ready != "" {
		hr.Status.Conditions = append(hr.Status.Conditions, metav1.Condition{
			Type: meta.ReadyCondition, Status: s.ready, Reason: s.reason, Message: s.message,
			ObservedGeneration: s.readyGeneration, LastTransitionTime: s.since(),
		})
	}
	if s.reconciling != "" {
		hr.Status.Conditions = append(hr.Status.Conditions, metav1.Condition{
			Type: meta.ReconcilingCondition, Status: metav1.ConditionTrue, Reason: meta.ProgressingReason,
			Message: s.reconciling, ObservedGeneration: s.readyGeneration, LastTransitionTime: metav1.Unix(int64(s.order), 0),
		})
	}
	for v := s.revisions; v >= 1; v-- {
		action := helmv2.ReleaseActionUpgrade
		if v == 1 {
			action = helmv2.ReleaseActionInstall
		}
		hr.Status.History = append(hr.Status.History, &helmv2.Snapshot{Version: v, Status: "deployed", Action: action})
	}
	return toUnstructured(t, hr)
}

// since stands for the Ready condition's lastTransitionTime, which changes
// with its status only.
func (s hrAt) since() metav1.Time {
	return metav1.Unix(int64(len(s.ready))+100*s.readyGeneration, 0)
}

func toUnstructured(t *testing.T, obj runtime.Object) *unstructured.Unstructured {
	t.Helper()
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		t.Fatal(err)
	}
	return &unstructured.Unstructured{Object: m}
}

func releaseHistory(t *testing.T, states ...hrAt) *ObjectHistory {
	h := &ObjectHistory{Kind: "HelmRelease"}
	for _, s := range states {
		h.States = append(h.States, Observation{Order: s.order, Object: s.object(t)})
	}
	return h
}

// installing is the HelmRelease up to and during the install of v1.
func installing() []hrAt {
	return []hrAt{
		{order: 10, generation: 1},
		{order: 12, generation: 1, ready: metav1.ConditionUnknown, reason: meta.ProgressingReason, readyGeneration: 1, reconciling: "Fulfilling prerequisites"},
		{order: 20, generation: 1, ready: metav1.ConditionUnknown, reason: meta.ProgressingReason, message: installAnnounce, readyGeneration: 1, reconciling: installAnnounce},
	}
}

// interruptedInstall is installing with a transient error of the
// controller at order 30 (a Ready=False that is no failed attempt), and
// the install announced again at order 32.
func interruptedInstall() []hrAt {
	return append(installing(),
		hrAt{order: 30, generation: 1, ready: metav1.ConditionFalse, reason: "ReconciliationFailed", readyGeneration: 1, reconciling: installAnnounce},
		hrAt{order: 32, generation: 1, ready: metav1.ConditionUnknown, reason: meta.ProgressingReason, message: installAnnounce, readyGeneration: 1, reconciling: installAnnounce},
	)
}

// installedReady is the Ready=True of v1 at order 60: the conditions
// request, then the rest of the status.
func installedReady() []hrAt {
	return []hrAt{
		{order: 60, generation: 1, ready: metav1.ConditionTrue, reason: helmv2.InstallSucceededReason, message: installSucceeded, readyGeneration: 1, revisions: 1},
		{order: 61, generation: 1, observedGeneration: 1, ready: metav1.ConditionTrue, reason: helmv2.InstallSucceededReason, message: installSucceeded, readyGeneration: 1, revisions: 1},
	}
}

func origin(obj metav1.Object, hook string) {
	obj.SetNamespace(oracleNS)
	obj.SetLabels(map[string]string{originNameLabel: oracleRelease, originNamespaceLabel: oracleNS})
	if hook != "" {
		obj.SetAnnotations(map[string]string{hookAnnotation: hook})
	} else {
		obj.SetAnnotations(map[string]string{releaseNameAnnotation: ownRelease, releaseNSAnnotation: oracleNS})
	}
}

// jobStep is one state of a Job: running, complete, failed or deleted
// (the last state kept, with the order of the deletion).
type jobStep struct {
	order   uint64
	outcome string // "", "Complete", "Failed"
	deleted bool
}

func jobHistory(t *testing.T, name, hook string, steps ...jobStep) *ObjectHistory {
	h := &ObjectHistory{Kind: "Job"}
	job := &batchv1.Job{TypeMeta: metav1.TypeMeta{APIVersion: "batch/v1", Kind: "Job"}}
	job.Name, job.UID = name, types.UID(fmt.Sprintf("%s-%d", name, steps[0].order))
	origin(job, hook)
	for _, s := range steps {
		switch s.outcome {
		case "Complete":
			job.Status.Succeeded = 1
			job.Status.Conditions = []batchv1.JobCondition{{Type: batchv1.JobComplete, Status: corev1.ConditionTrue}}
		case "Failed":
			job.Status.Failed = 1
			job.Status.Conditions = []batchv1.JobCondition{{Type: batchv1.JobFailed, Status: corev1.ConditionTrue, Reason: "BackoffLimitExceeded", Message: "Job has reached the specified backoff limit"}}
		}
		h.States = append(h.States, Observation{Order: s.order, Object: toUnstructured(t, job.DeepCopy()), Deleted: s.deleted})
	}
	return h
}

// deploymentHistory is the release's Deployment, created at order from and
// available from order ready (never when 0).
func deploymentHistory(t *testing.T, from, ready uint64) *ObjectHistory {
	h := &ObjectHistory{Kind: "Deployment"}
	d := &appsv1.Deployment{TypeMeta: metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"}}
	d.Name, d.UID, d.Generation = oracleRelease, "deploy-uid", 1
	d.Spec.Replicas = ptr.To[int32](1)
	origin(d, "")
	d.Status = appsv1.DeploymentStatus{ObservedGeneration: 1, Replicas: 1, UpdatedReplicas: 1, UnavailableReplicas: 1,
		Conditions: []appsv1.DeploymentCondition{{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionTrue, Reason: "ReplicaSetUpdated"}}}
	h.States = append(h.States, Observation{Order: from, Object: toUnstructured(t, d.DeepCopy())})
	if ready > 0 {
		d.Status = appsv1.DeploymentStatus{ObservedGeneration: 1, Replicas: 1, UpdatedReplicas: 1, ReadyReplicas: 1, AvailableReplicas: 1,
			Conditions: []appsv1.DeploymentCondition{
				{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionTrue, Reason: "MinimumReplicasAvailable"},
				{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionTrue, Reason: "NewReplicaSetAvailable"},
			}}
		h.States = append(h.States, Observation{Order: ready, Object: toUnstructured(t, d.DeepCopy())})
	}
	return h
}

// storedHook is what Helm stores for the chart's hook in every revision.
func storedHook(string, string, int) ([]HookRef, error) {
	return []HookRef{{Kind: "Job", Name: "ttl-hook", Events: []string{"post-install", "post-upgrade"}}}, nil
}

// judgeAll runs the oracle over every Ready=True of the recording's only
// HelmRelease and returns the lies, and how many transitions it judged.
func judgeAll(t *testing.T, rec *Recording) ([]Lie, int) {
	t.Helper()
	hr := rec.Releases[0]
	transitions, err := ReadyTransitions(hr)
	if err != nil {
		t.Fatal(err)
	}
	var lies []Lie
	for _, idx := range transitions {
		lies = append(lies, CheckTransition(rec, hr, idx, storedHook)...)
	}
	return lies, len(transitions)
}

func TestOracleTruthfulHistoryPasses(t *testing.T) {
	for _, tc := range []struct {
		name string
		rec  func(t *testing.T) *Recording
		want int // Ready=True transitions judged
	}{
		{"install: Jobs complete and deleted by their TTL, Deployment available", func(t *testing.T) *Recording {
			return &Recording{
				Releases: []*ObjectHistory{releaseHistory(t, append(installing(), installedReady()...)...)},
				Objects: []*ObjectHistory{
					deploymentHistory(t, 21, 45),
					jobHistory(t, "ttl-setup", "", jobStep{order: 22}, jobStep{order: 30, outcome: "Complete"}, jobStep{order: 31, outcome: "Complete", deleted: true}),
					jobHistory(t, "ttl-hook", "post-install,post-upgrade", jobStep{order: 40}, jobStep{order: 50, outcome: "Complete"}, jobStep{order: 51, outcome: "Complete", deleted: true}),
				},
			}
		}, 1},
		{"install retried: the first attempt's failed hook is not the revision's", func(t *testing.T) *Recording {
			states := append(installing(),
				hrAt{order: 35, generation: 1, observedGeneration: 1, ready: metav1.ConditionFalse, reason: helmv2.InstallFailedReason, readyGeneration: 1, reconciling: installAnnounce},
				hrAt{order: 38, generation: 1, observedGeneration: 1, ready: metav1.ConditionUnknown, reason: meta.ProgressingReason, message: installAnnounce, readyGeneration: 1, reconciling: installAnnounce},
			)
			return &Recording{
				Releases: []*ObjectHistory{releaseHistory(t, append(states, installedReady()...)...)},
				Objects: []*ObjectHistory{
					deploymentHistory(t, 21, 45),
					jobHistory(t, "ttl-hook-first", "post-install", jobStep{order: 25}, jobStep{order: 30, outcome: "Failed"}),
					jobHistory(t, "ttl-hook", "post-install,post-upgrade", jobStep{order: 40}, jobStep{order: 50, outcome: "Complete"}),
				},
			}
		}, 1},
		{"a transient error during the install wrote Ready=False after the hook ran: the hook is still the revision's", func(t *testing.T) *Recording {
			return &Recording{
				Releases: []*ObjectHistory{releaseHistory(t, append(interruptedInstall(), installedReady()...)...)},
				Objects: []*ObjectHistory{
					deploymentHistory(t, 21, 45),
					jobHistory(t, "ttl-hook", "post-install,post-upgrade", jobStep{order: 24}, jobStep{order: 28, outcome: "Complete"}),
				},
			}
		}, 1},
		{"the release deleted after the conditions request: status.observedGeneration never written", func(t *testing.T) *Recording {
			states := append(installing(),
				hrAt{order: 60, generation: 1, ready: metav1.ConditionTrue, reason: helmv2.InstallSucceededReason, message: installSucceeded, readyGeneration: 1, revisions: 1})
			hr := releaseHistory(t, states...)
			last := hr.States[len(hr.States)-1]
			hr.States = append(hr.States, Observation{Order: 70, Object: last.Object, Deleted: true})
			return &Recording{
				Releases: []*ObjectHistory{hr},
				Objects: []*ObjectHistory{
					deploymentHistory(t, 21, 45),
					jobHistory(t, "ttl-hook", "post-install,post-upgrade", jobStep{order: 40}, jobStep{order: 50, outcome: "Complete"}),
				},
			}
		}, 1},
		{"a controller restarted during the wait announces the install again: the hook that ran before is still the revision's", func(t *testing.T) *Recording {
			states := append(installing(),
				hrAt{order: 33, generation: 1, ready: metav1.ConditionUnknown, reason: meta.ProgressingReason, message: installAnnounce, readyGeneration: 1, reconciling: "Fulfilling prerequisites"},
				hrAt{order: 34, generation: 1, ready: metav1.ConditionUnknown, reason: meta.ProgressingReason, message: installAnnounce, readyGeneration: 1, reconciling: installAnnounce},
			)
			return &Recording{
				Releases: []*ObjectHistory{releaseHistory(t, append(states, installedReady()...)...)},
				Objects: []*ObjectHistory{
					deploymentHistory(t, 21, 45),
					jobHistory(t, "ttl-hook", "post-install,post-upgrade", jobStep{order: 25}, jobStep{order: 28, outcome: "Complete"}, jobStep{order: 29, outcome: "Complete", deleted: true}),
				},
			}
		}, 1},
		{"a hook cut short by a restart and run again under the same name: the last one is the revision's", func(t *testing.T) *Recording {
			states := append(installing(),
				hrAt{order: 33, generation: 1, ready: metav1.ConditionUnknown, reason: meta.ProgressingReason, message: installAnnounce, readyGeneration: 1, reconciling: "Fulfilling prerequisites"},
				hrAt{order: 34, generation: 1, ready: metav1.ConditionUnknown, reason: meta.ProgressingReason, message: installAnnounce, readyGeneration: 1, reconciling: installAnnounce},
			)
			return &Recording{
				Releases: []*ObjectHistory{releaseHistory(t, append(states, installedReady()...)...)},
				Objects: []*ObjectHistory{
					deploymentHistory(t, 21, 45),
					// Helm deleted the running hook before it created it again.
					jobHistory(t, "ttl-hook", "post-install,post-upgrade", jobStep{order: 25}, jobStep{order: 36, deleted: true}),
					jobHistory(t, "ttl-hook", "post-install,post-upgrade", jobStep{order: 40}, jobStep{order: 50, outcome: "Complete"}),
				},
			}
		}, 1},
		{"a controller killed between its two status requests: the Ready=True written after the restart closes the same install", func(t *testing.T) *Recording {
			states := append(installing(),
				// The conditions landed; the history never did.
				hrAt{order: 60, generation: 1, ready: metav1.ConditionTrue, reason: helmv2.InstallSucceededReason, message: installSucceeded, readyGeneration: 1},
				// The restarted controller finds the revision deployed and writes Ready again.
				hrAt{order: 70, generation: 1, ready: metav1.ConditionUnknown, reason: meta.ProgressingReason, message: "Fulfilling prerequisites", readyGeneration: 1, reconciling: "Fulfilling prerequisites"},
				hrAt{order: 80, generation: 1, ready: metav1.ConditionTrue, reason: helmv2.InstallSucceededReason, message: installSucceeded, readyGeneration: 1, revisions: 1},
				hrAt{order: 81, generation: 1, observedGeneration: 1, ready: metav1.ConditionTrue, reason: helmv2.InstallSucceededReason, message: installSucceeded, readyGeneration: 1, revisions: 1},
			)
			return &Recording{
				Releases: []*ObjectHistory{releaseHistory(t, states...)},
				Objects: []*ObjectHistory{
					deploymentHistory(t, 21, 45),
					jobHistory(t, "ttl-hook", "post-install,post-upgrade", jobStep{order: 40}, jobStep{order: 50, outcome: "Complete"}, jobStep{order: 51, outcome: "Complete", deleted: true}),
				},
			}
		}, 2},
		{"the spec changed while Ready was written: Ready names the generation it reconciled", func(t *testing.T) *Recording {
			states := installing()
			states = append(states,
				hrAt{order: 59, generation: 2, ready: metav1.ConditionUnknown, reason: meta.ProgressingReason, message: installAnnounce, readyGeneration: 1, reconciling: installAnnounce},
				hrAt{order: 60, generation: 2, ready: metav1.ConditionTrue, reason: helmv2.InstallSucceededReason, message: installSucceeded, readyGeneration: 1, revisions: 1},
				hrAt{order: 61, generation: 2, observedGeneration: 1, ready: metav1.ConditionTrue, reason: helmv2.InstallSucceededReason, message: installSucceeded, readyGeneration: 1, revisions: 1},
			)
			return &Recording{
				Releases: []*ObjectHistory{releaseHistory(t, states...)},
				Objects: []*ObjectHistory{
					deploymentHistory(t, 21, 45),
					jobHistory(t, "ttl-hook", "post-install,post-upgrade", jobStep{order: 40}, jobStep{order: 50, outcome: "Complete"}),
				},
			}
		}, 1},
		{"disableWait: a Deployment not ready yet is no lie", func(t *testing.T) *Recording {
			states := append(installing(), installedReady()...)
			for i := range states {
				states[i].disableWait = true
			}
			return &Recording{
				Releases: []*ObjectHistory{releaseHistory(t, states...)},
				Objects: []*ObjectHistory{
					deploymentHistory(t, 21, 0),
					jobHistory(t, "ttl-setup", "", jobStep{order: 22}),
					jobHistory(t, "ttl-hook", "post-install,post-upgrade", jobStep{order: 40}, jobStep{order: 50, outcome: "Complete"}),
				},
			}
		}, 1},
		{"a no-op reconcile that rewrites Ready judges the workloads only", func(t *testing.T) *Recording {
			states := append(installing(), installedReady()...)
			states = append(states, hrAt{order: 80, generation: 2, observedGeneration: 2, ready: metav1.ConditionTrue,
				reason: helmv2.InstallSucceededReason, message: installSucceeded, readyGeneration: 2, revisions: 1})
			return &Recording{
				Releases: []*ObjectHistory{releaseHistory(t, states...)},
				Objects: []*ObjectHistory{
					deploymentHistory(t, 21, 45),
					jobHistory(t, "ttl-hook", "post-install,post-upgrade", jobStep{order: 40}, jobStep{order: 50, outcome: "Complete"}, jobStep{order: 51, outcome: "Complete", deleted: true}),
				},
			}
		}, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lies, judged := judgeAll(t, tc.rec(t))
			for _, l := range lies {
				t.Errorf("truthful history judged a lie: %s", l)
			}
			if judged != tc.want {
				t.Errorf("judged %d Ready=True transitions, want %d", judged, tc.want)
			}
		})
	}
}

func TestOracleFindsPlantedLies(t *testing.T) {
	for _, tc := range []struct {
		name string
		rec  func(t *testing.T) *Recording
		// want are strings that one lie must all contain.
		want []string
	}{
		{"a stand-in Complete: the TTL'd Job failed and was deleted", func(t *testing.T) *Recording {
			return &Recording{
				Releases: []*ObjectHistory{releaseHistory(t, append(installing(), installedReady()...)...)},
				Objects: []*ObjectHistory{
					deploymentHistory(t, 21, 45),
					jobHistory(t, "ttl-setup", "", jobStep{order: 22}, jobStep{order: 30, outcome: "Failed"}, jobStep{order: 31, outcome: "Failed", deleted: true}),
					jobHistory(t, "ttl-hook", "post-install,post-upgrade", jobStep{order: 40}, jobStep{order: 50, outcome: "Complete"}),
				},
			}
		}, []string{"HelmRelease ns/ttl Ready=True at revision 1", "Job/ns/ttl-setup", "failed at resourceVersion 30", "BackoffLimitExceeded", "deleted before Ready"}},
		{"a skipped post hook: it never ran", func(t *testing.T) *Recording {
			return &Recording{
				Releases: []*ObjectHistory{releaseHistory(t, append(installing(), installedReady()...)...)},
				Objects:  []*ObjectHistory{deploymentHistory(t, 21, 45)},
			}
		}, []string{"revision 1", "Job/ns/ttl-hook", "post-install,post-upgrade hook of the revision never ran"}},
		{"a post hook that failed", func(t *testing.T) *Recording {
			return &Recording{
				Releases: []*ObjectHistory{releaseHistory(t, append(installing(), installedReady()...)...)},
				Objects: []*ObjectHistory{
					deploymentHistory(t, 21, 45),
					jobHistory(t, "ttl-hook", "post-install,post-upgrade", jobStep{order: 40}, jobStep{order: 50, outcome: "Failed"}, jobStep{order: 51, outcome: "Failed", deleted: true}),
				},
			}
		}, []string{"Job/ns/ttl-hook", "failed at resourceVersion 50"}},
		{"a post hook still running", func(t *testing.T) *Recording {
			return &Recording{
				Releases: []*ObjectHistory{releaseHistory(t, append(installing(), installedReady()...)...)},
				Objects: []*ObjectHistory{
					deploymentHistory(t, 21, 45),
					jobHistory(t, "ttl-hook", "post-install,post-upgrade", jobStep{order: 40}, jobStep{order: 70, outcome: "Complete"}),
				},
			}
		}, []string{"Job/ns/ttl-hook", "had not completed: still running"}},
		{"a hook that failed before a transient error wrote Ready=False", func(t *testing.T) *Recording {
			return &Recording{
				Releases: []*ObjectHistory{releaseHistory(t, append(interruptedInstall(), installedReady()...)...)},
				Objects: []*ObjectHistory{
					deploymentHistory(t, 21, 45),
					jobHistory(t, "ttl-hook", "post-install,post-upgrade", jobStep{order: 24}, jobStep{order: 28, outcome: "Failed"}),
				},
			}
		}, []string{"Job/ns/ttl-hook", "failed at resourceVersion 28"}},
		{"a Deployment not available", func(t *testing.T) *Recording {
			return &Recording{
				Releases: []*ObjectHistory{releaseHistory(t, append(installing(), installedReady()...)...)},
				Objects: []*ObjectHistory{
					deploymentHistory(t, 21, 65),
					jobHistory(t, "ttl-hook", "post-install,post-upgrade", jobStep{order: 40}, jobStep{order: 50, outcome: "Complete"}),
				},
			}
		}, []string{"Deployment/ns/ttl", "InProgress"}},
		{"a Ready written one generation early: the upgrade of generation 2 reports generation 1", func(t *testing.T) *Recording {
			states := append(installing(), installedReady()...)
			states = append(states,
				hrAt{order: 70, generation: 2, observedGeneration: 1, ready: metav1.ConditionTrue, reason: helmv2.InstallSucceededReason, message: installSucceeded, readyGeneration: 1, revisions: 1},
				hrAt{order: 72, generation: 2, observedGeneration: 1, ready: metav1.ConditionUnknown, reason: meta.ProgressingReason, message: upgradeAnnounce, readyGeneration: 2, reconciling: upgradeAnnounce, revisions: 1},
				hrAt{order: 90, generation: 2, observedGeneration: 1, ready: metav1.ConditionTrue, reason: helmv2.UpgradeSucceededReason, message: upgradeSucceeded, readyGeneration: 1, revisions: 2},
			)
			return &Recording{
				Releases: []*ObjectHistory{releaseHistory(t, states...)},
				Objects: []*ObjectHistory{
					deploymentHistory(t, 21, 45),
					jobHistory(t, "ttl-hook", "post-install,post-upgrade", jobStep{order: 40}, jobStep{order: 50, outcome: "Complete"}, jobStep{order: 51, outcome: "Complete", deleted: true}),
					jobHistory(t, "ttl-hook", "post-install,post-upgrade", jobStep{order: 75}, jobStep{order: 80, outcome: "Complete"}),
				},
			}
		}, []string{"revision 2", "names generation 1 of generation 2, which the controller had already started on"}},
		{"a Ready condition whose status.observedGeneration stays one behind", func(t *testing.T) *Recording {
			states := append(installing(),
				hrAt{order: 60, generation: 1, ready: metav1.ConditionTrue, reason: helmv2.InstallSucceededReason, message: installSucceeded, readyGeneration: 1, revisions: 1},
				hrAt{order: 61, generation: 1, ready: metav1.ConditionTrue, reason: helmv2.InstallSucceededReason, message: installSucceeded, readyGeneration: 1, revisions: 1},
			)
			return &Recording{
				Releases: []*ObjectHistory{releaseHistory(t, states...)},
				Objects: []*ObjectHistory{
					deploymentHistory(t, 21, 45),
					jobHistory(t, "ttl-hook", "post-install,post-upgrade", jobStep{order: 40}, jobStep{order: 50, outcome: "Complete"}),
				},
			}
		}, []string{"the Ready condition is for generation 1 while status.observedGeneration is 0"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lies, _ := judgeAll(t, tc.rec(t))
			if !anyLieSays(lies, tc.want) {
				t.Errorf("no lie says all of %q; lies: %v", tc.want, lies)
			}
		})
	}
}

func anyLieSays(lies []Lie, want []string) bool {
	for _, l := range lies {
		text, all := l.String(), true
		for _, w := range want {
			all = all && strings.Contains(text, w)
		}
		if all {
			return true
		}
	}
	return false
}

// withPolicy sets the hook-delete-policy on every state of a Job history.
func withPolicy(h *ObjectHistory, policy string) *ObjectHistory {
	for _, s := range h.States {
		a := s.Object.GetAnnotations()
		a[hookDeletePolicyAnnotation] = policy
		s.Object.SetAnnotations(a)
	}
	return h
}

// ownRelease is the Helm release of the histories: the controller names it
// <namespace>-<name>, as the objects' meta.helm.sh/release-name says.
const ownRelease = oracleNS + "-" + oracleRelease

// storedRevision is the Helm storage Secret of revision version of
// release, created at order: Helm stores it when an install, upgrade or
// rollback starts, before it applies anything.
func storedRevision(t *testing.T, release string, version int, order uint64) *ObjectHistory {
	s := &corev1.Secret{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"}, Type: "helm.sh/release.v1"}
	s.Namespace, s.Name = oracleNS, fmt.Sprintf("sh.helm.release.v1.%s.v%d", release, version)
	s.UID = types.UID(fmt.Sprintf("%s-%d", s.Name, order))
	s.Labels = map[string]string{"owner": "helm", "name": release, "version": fmt.Sprint(version), "status": "pending-upgrade"}
	return &ObjectHistory{Kind: "Secret", States: []Observation{{Order: order, Object: toUnstructured(t, s)}}}
}

// hookPodHistory is a bare hook Pod, running from order from, deleted at
// order deleted while still in phase.
func hookPodHistory(t *testing.T, from, deleted uint64, phase corev1.PodPhase, owned bool) *ObjectHistory {
	p := &corev1.Pod{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"}}
	p.Name, p.UID = "ttl-hook-pod", types.UID(fmt.Sprintf("pod-%d", from))
	origin(p, "post-delete")
	if owned {
		p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: "ttl-hook", UID: "job"}}
	}
	p.Status.Phase = corev1.PodRunning
	h := &ObjectHistory{Kind: "Pod", States: []Observation{{Order: from, Object: toUnstructured(t, p.DeepCopy())}}}
	p.Status.Phase = phase
	h.States = append(h.States, Observation{Order: deleted, Object: toUnstructured(t, p.DeepCopy()), Deleted: true})
	return h
}

func TestOracleFindsKilledRuns(t *testing.T) {
	hook := "post-install,post-upgrade"
	for _, tc := range []struct {
		name    string
		objects func(t *testing.T) []*ObjectHistory
		allowed []string
		// want are the killed objects, in order.
		want []string
	}{
		{"a finished hook Job deleted: no kill", func(t *testing.T) []*ObjectHistory {
			return []*ObjectHistory{jobHistory(t, "ttl-hook", hook, jobStep{order: 40}, jobStep{order: 50, outcome: "Complete"}, jobStep{order: 51, outcome: "Complete", deleted: true})}
		}, nil, nil},
		{"a failed hook Job deleted: no kill", func(t *testing.T) []*ObjectHistory {
			return []*ObjectHistory{jobHistory(t, "ttl-hook", hook, jobStep{order: 40}, jobStep{order: 50, outcome: "Failed"}, jobStep{order: 51, outcome: "Failed", deleted: true})}
		}, nil, nil},
		{"a running hook Job deleted (hook cleanup at uninstall): a kill", func(t *testing.T) []*ObjectHistory {
			return []*ObjectHistory{jobHistory(t, "ttl-hook", hook, jobStep{order: 40}, jobStep{order: 50, deleted: true})}
		}, nil, []string{"Job/ns/ttl-hook"}},
		{"a running hook Job that the test deletes: allowed", func(t *testing.T) []*ObjectHistory {
			return []*ObjectHistory{jobHistory(t, "ttl-hook", hook, jobStep{order: 40}, jobStep{order: 50, deleted: true})}
		}, []string{"Job/ttl-hook"}, nil},
		{"a running hook Job replaced by Helm before the next run (default policy): no kill", func(t *testing.T) []*ObjectHistory {
			return []*ObjectHistory{
				jobHistory(t, "ttl-hook", hook, jobStep{order: 40}, jobStep{order: 50, deleted: true}),
				jobHistory(t, "ttl-hook", hook, jobStep{order: 52}, jobStep{order: 60, outcome: "Complete"}),
			}
		}, nil, nil},
		{"a running hook Job whose policy is hook-succeeded, deleted and created again: a kill", func(t *testing.T) []*ObjectHistory {
			return []*ObjectHistory{
				withPolicy(jobHistory(t, "ttl-hook", hook, jobStep{order: 40}, jobStep{order: 50, deleted: true}), "hook-succeeded"),
				withPolicy(jobHistory(t, "ttl-hook", hook, jobStep{order: 52}, jobStep{order: 60, outcome: "Complete"}), "hook-succeeded"),
			}
		}, nil, []string{"Job/ns/ttl-hook"}},
		{"a running Job of the release recreated under its name, no storage recorded: a kill", func(t *testing.T) []*ObjectHistory {
			return []*ObjectHistory{
				jobHistory(t, "ttl-setup", "", jobStep{order: 40}, jobStep{order: 50, deleted: true}),
				jobHistory(t, "ttl-setup", "", jobStep{order: 52}),
			}
		}, nil, []string{"Job/ns/ttl-setup"}},
		{"a running Job deleted and created again within one upgrade (a recreate): a kill", func(t *testing.T) []*ObjectHistory {
			return []*ObjectHistory{
				storedRevision(t, ownRelease, 1, 15), storedRevision(t, ownRelease, 2, 45),
				jobHistory(t, "ttl-setup", "", jobStep{order: 20}, jobStep{order: 50, deleted: true}),
				jobHistory(t, "ttl-setup", "", jobStep{order: 52}),
			}
		}, nil, []string{"Job/ns/ttl-setup"}},
		{"a running Job deleted and created again by a drift correction (no revision stored): a kill", func(t *testing.T) []*ObjectHistory {
			return []*ObjectHistory{
				storedRevision(t, ownRelease, 1, 15),
				jobHistory(t, "ttl-setup", "", jobStep{order: 20}, jobStep{order: 50, deleted: true}),
				jobHistory(t, "ttl-setup", "", jobStep{order: 52}),
			}
		}, nil, []string{"Job/ns/ttl-setup"}},
		{"a recreate with another release's revision stored in between: a kill", func(t *testing.T) []*ObjectHistory {
			return []*ObjectHistory{
				storedRevision(t, ownRelease, 1, 15), storedRevision(t, ownRelease, 2, 45), storedRevision(t, "ns-other", 1, 51),
				jobHistory(t, "ttl-setup", "", jobStep{order: 20}, jobStep{order: 50, deleted: true}),
				jobHistory(t, "ttl-setup", "", jobStep{order: 52}),
			}
		}, nil, []string{"Job/ns/ttl-setup"}},
		// Seed 785024983440176111 of the generated parity run: timed-job-1-r0
		// is in revision 1 only; the upgrade to revision 2 drops it while it
		// runs, a hand rollback (revision 3) makes it again, and the next
		// hand rollback (revision 4) drops that one too.
		{"a running Job dropped by an upgrade and made again by a later hand rollback: no kill", func(t *testing.T) []*ObjectHistory {
			return []*ObjectHistory{
				storedRevision(t, ownRelease, 1, 15), storedRevision(t, ownRelease, 2, 45),
				storedRevision(t, ownRelease, 3, 60), storedRevision(t, ownRelease, 4, 70),
				jobHistory(t, "timed-job-1-r0", "", jobStep{order: 20}, jobStep{order: 50, deleted: true}),
				jobHistory(t, "timed-job-1-r1", "", jobStep{order: 47}, jobStep{order: 64, deleted: true}),
				jobHistory(t, "timed-job-1-r0", "", jobStep{order: 62}, jobStep{order: 74, deleted: true}),
				jobHistory(t, "timed-job-1-r1", "", jobStep{order: 72}),
			}
		}, nil, nil},
		{"a running hook Job whose policy is hook-succeeded, deleted and created again by a later action: a kill", func(t *testing.T) []*ObjectHistory {
			return []*ObjectHistory{
				storedRevision(t, ownRelease, 1, 15), storedRevision(t, ownRelease, 2, 45),
				withPolicy(jobHistory(t, "ttl-hook", hook, jobStep{order: 20}, jobStep{order: 30, deleted: true}), "hook-succeeded"),
				withPolicy(jobHistory(t, "ttl-hook", hook, jobStep{order: 52}, jobStep{order: 60, outcome: "Complete"}), "hook-succeeded"),
			}
		}, nil, []string{"Job/ns/ttl-hook"}},
		{"a running Job of the release deleted for good (an uninstall, as upstream): no kill", func(t *testing.T) []*ObjectHistory {
			return []*ObjectHistory{jobHistory(t, "ttl-setup", "", jobStep{order: 40}, jobStep{order: 50, deleted: true})}
		}, nil, nil},
		{"a running bare hook Pod deleted: a kill", func(t *testing.T) []*ObjectHistory {
			return []*ObjectHistory{hookPodHistory(t, 40, 50, corev1.PodRunning, false)}
		}, nil, []string{"Pod/ns/ttl-hook-pod"}},
		{"a succeeded bare hook Pod deleted: no kill", func(t *testing.T) []*ObjectHistory {
			return []*ObjectHistory{hookPodHistory(t, 40, 50, corev1.PodSucceeded, false)}
		}, nil, nil},
		{"a running Pod of a hook Job deleted (its Job's business): no kill", func(t *testing.T) []*ObjectHistory {
			return []*ObjectHistory{hookPodHistory(t, 40, 50, corev1.PodRunning, true)}
		}, nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			rec := &Recording{}
			for _, h := range tc.objects(t) {
				if h.Kind == "Secret" {
					rec.Storage = append(rec.Storage, h)
				} else {
					rec.Objects = append(rec.Objects, h)
				}
			}
			for _, k := range KilledRuns(rec, tc.allowed) {
				got = append(got, k.Object)
				if !strings.Contains(k.String(), "while it still ran") {
					t.Errorf("kill says %q", k)
				}
			}
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Errorf("kills %v, want %v", got, tc.want)
			}
		})
	}
}

func TestUpstreamRanTellsTheBinaryOfTheShardAtATime(t *testing.T) {
	shard := "oracle-test-" + t.Name()
	recordStart(shard, "/cache/tools/bin/helm-controller")
	ours := time.Now()
	time.Sleep(2 * time.Millisecond)
	recordStart(shard, "/cache/tools/helm-controller-upstream-6cafe4207ed00f27")
	upstream := time.Now()
	time.Sleep(2 * time.Millisecond)
	recordStart(shard, "/cache/tools/bin/helm-controller")
	back := time.Now()
	for _, tc := range []struct {
		name string
		at   time.Time
		want bool
	}{
		{"before any start", ours.Add(-time.Hour), false},
		{"while ours ran", ours, false},
		{"while upstream ran", upstream, true},
		{"after ours came back", back, false},
	} {
		if got := upstreamRan(shard, tc.at); got != tc.want {
			t.Errorf("%s: upstreamRan %t, want %t", tc.name, got, tc.want)
		}
	}
	if upstreamRan("another shard", upstream) {
		t.Error("a shard with no start counted as upstream's")
	}
}
