package reconcile

import (
	"errors"
	"strings"
	"testing"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	"github.com/fluxcd/pkg/ssa/jsondiff"
	wjsondiff "github.com/wI2L/jsondiff"
	"helm.sh/helm/v4/pkg/release/common"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	v2 "github.com/afterhooks/helm-controller/api/v2"
)

func driftObject(kind, name string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion("v1")
	u.SetKind(kind)
	u.SetNamespace("default")
	u.SetName(name)
	return u
}

var (
	replicasChanged = jsondiff.DiffSet{jsondiff.NewDiffForUnstructured(driftObject("Deployment", "app"), driftObject("Deployment", "app"),
		jsondiff.DiffTypeUpdate, wjsondiff.Patch{{Type: wjsondiff.OperationReplace, Path: "/spec/replicas", Value: 1}})}
	serviceDeleted = jsondiff.DiffSet{jsondiff.NewDiffForUnstructured(driftObject("Service", "app"), nil, jsondiff.DiffTypeCreate, nil)}
	noDrift        = jsondiff.DiffSet{jsondiff.NewDiffForUnstructured(driftObject("Service", "app"), driftObject("Service", "app"), jsondiff.DiffTypeNone, nil)}
	onlyExcluded   = jsondiff.DiffSet{jsondiff.NewDiffForUnstructured(driftObject("Deployment", "app"), nil, jsondiff.DiffTypeExclude, nil)}
)

func withDriftMode(mode helmv2.DriftDetectionMode) func(*v2.HelmRelease) {
	return func(obj *v2.HelmRelease) {
		obj.Spec.DriftDetection = &helmv2.DriftDetection{Mode: mode}
	}
}

func TestDriftStates(t *testing.T) {
	tests := []struct {
		name       string
		mode       helmv2.DriftDetectionMode
		drift      []jsondiff.DiffSet
		detectErr  error
		correctErr error

		wantErr     string // substring; empty for success
		wantCalls   []string
		wantDrifted metav1.ConditionStatus // "" for no condition
		wantReason  string                 // of Drifted
		wantReady   metav1.ConditionStatus
		readyReason string
		wantEvents  []string // drift events, in order
	}{
		{
			name: "disabled mode does not look", mode: helmv2.DriftDetectionDisabled, drift: []jsondiff.DiffSet{replicasChanged},
			wantCalls: []string{"install"}, wantReady: metav1.ConditionTrue, readyReason: helmv2.InstallSucceededReason,
		},
		{
			name: "enabled without drift", mode: helmv2.DriftDetectionEnabled, drift: []jsondiff.DiffSet{noDrift},
			wantCalls: []string{"install", "detect"}, wantDrifted: metav1.ConditionFalse, wantReason: helmv2.NoDriftDetectedReason,
			wantReady: metav1.ConditionTrue, readyReason: helmv2.InstallSucceededReason,
		},
		{
			name: "excluded objects are not drift", mode: helmv2.DriftDetectionEnabled, drift: []jsondiff.DiffSet{onlyExcluded},
			wantCalls: []string{"install", "detect"}, wantDrifted: metav1.ConditionFalse, wantReason: helmv2.NoDriftDetectedReason,
			wantReady: metav1.ConditionTrue, readyReason: helmv2.InstallSucceededReason,
		},
		{
			name: "enabled corrects, then finds no drift", mode: helmv2.DriftDetectionEnabled, drift: []jsondiff.DiffSet{append(replicasChanged, serviceDeleted...), noDrift},
			wantCalls: []string{"install", "detect", "correct", "detect"}, wantDrifted: metav1.ConditionFalse, wantReason: helmv2.NoDriftDetectedReason,
			wantReady: metav1.ConditionTrue, readyReason: helmv2.InstallSucceededReason,
			wantEvents: []string{helmv2.DriftDetectedReason, DriftCorrectedReason},
		},
		{
			name: "warn only reports", mode: helmv2.DriftDetectionWarn, drift: []jsondiff.DiffSet{replicasChanged},
			wantCalls: []string{"install", "detect"}, wantDrifted: metav1.ConditionTrue, wantReason: helmv2.DriftDetectedReason,
			wantReady: metav1.ConditionTrue, readyReason: helmv2.InstallSucceededReason,
			wantEvents: []string{helmv2.DriftDetectedReason},
		},
		{
			name: "failed correction", mode: helmv2.DriftDetectionEnabled, drift: []jsondiff.DiffSet{replicasChanged},
			correctErr: errors.New("admission webhook denied the request"), wantErr: "admission webhook denied",
			wantCalls: []string{"install", "detect", "correct"}, wantDrifted: metav1.ConditionTrue, wantReason: helmv2.DriftDetectedReason,
			// As upstream: Ready Unknown, still progressing, not False.
			wantReady: metav1.ConditionUnknown, readyReason: meta.ProgressingReason,
			wantEvents: []string{helmv2.DriftDetectedReason, DriftCorrectionFailedReason},
		},
		{
			name: "drift that survives its correction waits for the next interval", mode: helmv2.DriftDetectionEnabled, drift: []jsondiff.DiffSet{replicasChanged},
			wantCalls: []string{"install", "detect", "correct", "detect"}, wantDrifted: metav1.ConditionTrue, wantReason: helmv2.DriftDetectedReason,
			wantReady: metav1.ConditionUnknown, readyReason: meta.ProgressingReason,
			wantEvents: []string{helmv2.DriftDetectedReason, DriftCorrectedReason, DriftCorrectionFailedReason},
		},
		{
			name: "detection failure", mode: helmv2.DriftDetectionWarn, detectErr: errors.New("the server is currently unable to handle the request"),
			wantErr: "Could not compare release", wantCalls: []string{"install", "detect"},
			wantDrifted: metav1.ConditionUnknown, wantReason: DriftDetectionFailedReason,
			wantReady: metav1.ConditionFalse, readyReason: DriftDetectionFailedReason,
			wantEvents: []string{DriftDetectionFailedReason},
		},
		{
			name: "partial detection failure still reports what drifted", mode: helmv2.DriftDetectionWarn, drift: []jsondiff.DiffSet{serviceDeleted},
			detectErr: errors.New("ConfigMap/default/x dry-run failed"),
			wantCalls: []string{"install", "detect"}, wantDrifted: metav1.ConditionTrue, wantReason: helmv2.DriftDetectedReason,
			wantReady: metav1.ConditionTrue, readyReason: helmv2.InstallSucceededReason,
			wantEvents: []string{helmv2.DriftDetectedReason},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(withDriftMode(tt.mode))
			h.helm.drift, h.helm.detectErr, h.helm.correctErr = tt.drift, tt.detectErr, tt.correctErr
			err := h.run(t)
			if tt.wantErr == "" && err != nil {
				t.Fatalf("reconcile failed: %v", err)
			}
			if tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
				t.Fatalf("error %v, want it to contain %q", err, tt.wantErr)
			}
			wantCalls(t, h, tt.wantCalls...)
			if tt.wantDrifted == "" {
				if c := conditions.Get(h.obj, helmv2.DriftedCondition); c != nil {
					t.Errorf("unexpected Drifted condition %+v", c)
				}
			} else {
				wantCondition(t, h, helmv2.DriftedCondition, tt.wantDrifted, tt.wantReason)
			}
			wantCondition(t, h, meta.ReadyCondition, tt.wantReady, tt.readyReason)

			var got []string
			for _, e := range h.recorder.events {
				if e.Reason != helmv2.InstallSucceededReason {
					got = append(got, e.Reason)
				}
			}
			if strings.Join(got, ",") != strings.Join(tt.wantEvents, ",") {
				t.Errorf("events %v, want %v", got, tt.wantEvents)
			}
		})
	}
}

func TestDriftEventNamesWhatDrifted(t *testing.T) {
	h := newHarness(withDriftMode(helmv2.DriftDetectionWarn))
	h.helm.drift = []jsondiff.DiffSet{append(replicasChanged, serviceDeleted...)}
	h.mustRun(t)
	var ev *recordedEvent
	for i := range h.recorder.events {
		if h.recorder.events[i].Reason == helmv2.DriftDetectedReason {
			ev = &h.recorder.events[i]
		}
	}
	if ev == nil || ev.Type != corev1.EventTypeWarning {
		t.Fatalf("no DriftDetected warning among %+v", h.recorder.events)
	}
	for _, want := range []string{"default/app.v1", "Deployment/default/app changed (0 added, 1 replaced, 0 removed)", "Service/default/app deleted"} {
		if !strings.Contains(ev.Message, want) {
			t.Errorf("event message %q lacks %q", ev.Message, want)
		}
	}
	if c := conditions.Get(h.obj, helmv2.DriftedCondition); c == nil || c.Message != ev.Message {
		t.Errorf("Drifted condition %+v does not carry the event message", c)
	}
}

// Drift is only looked for once the release is in sync: never while an
// action is due or an afterHooks readiness wait is pending.
func TestDriftOnlyCheckedInSync(t *testing.T) {
	h := newHarness(withDriftMode(helmv2.DriftDetectionEnabled))
	h.helm.drift = []jsondiff.DiffSet{noDrift}
	h.mustRun(t)
	wantCalls(t, h, "install", "detect")

	// New values: the upgrade comes first, drift is checked on its result.
	h.values = map[string]any{"replicas": 2}
	h.mustRun(t)
	wantCalls(t, h, "upgrade", "detect")

	// A failing upgrade ends the reconcile before any drift check.
	h.values = map[string]any{"replicas": 3}
	h.helm.fail["upgrade"] = errors.New("boom")
	if err := h.run(t); err == nil {
		t.Fatal("expected the upgrade to fail")
	}
	for _, c := range h.takeCalls() {
		if c == "detect" || c == "correct" {
			t.Fatalf("drift checked after a failed upgrade")
		}
	}
}

func TestDisablingDriftDetectionRemovesTheCondition(t *testing.T) {
	h := newHarness(withDriftMode(helmv2.DriftDetectionWarn))
	h.helm.drift = []jsondiff.DiffSet{replicasChanged}
	h.mustRun(t)
	wantCondition(t, h, helmv2.DriftedCondition, metav1.ConditionTrue, helmv2.DriftDetectedReason)
	wantCalls(t, h, "install", "detect")

	h.obj.Spec.DriftDetection = nil
	h.mustRun(t)
	wantCalls(t, h)
	if c := conditions.Get(h.obj, helmv2.DriftedCondition); c != nil {
		t.Errorf("Drifted condition %+v left after disabling drift detection", c)
	}
}

// A revision whose afterHooks readiness wait is pending is not in sync:
// its wait is resumed first, and only a release that passed it is
// compared with the cluster.
func TestDriftWaitsForAfterHooksReadiness(t *testing.T) {
	cases := []struct {
		name      string
		resumeErr error
		wantCalls []string
	}{
		{name: "wait passes, then drift is checked", wantCalls: []string{"resume", "detect", "correct", "detect"}},
		{name: "wait fails, remediation ends the reconcile", resumeErr: errors.New("Deployment/default/app: InProgress"),
			wantCalls: []string{"resume", "uninstall"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(withDriftMode(helmv2.DriftDetectionEnabled), func(o *v2.HelmRelease) {
				o.Spec.Install = &v2.Install{WaitStrategy: v2.AfterHooks}
				o.Spec.Install.Remediation = &helmv2.InstallRemediation{Retries: 3}
			})
			h.helm.drift = []jsondiff.DiffSet{replicasChanged, noDrift}
			chart, _ := h.chart.Load()
			rel := h.helm.newRelease(chart, h.values, common.StatusPendingInstall)
			rel.Info.Description = awaitingMarker(time.Now().Add(time.Minute))
			h.helm.fail["resume"] = tc.resumeErr

			_ = h.run(t)
			wantCalls(t, h, tc.wantCalls...)
		})
	}
}

func TestFirstLines(t *testing.T) {
	cases := []struct {
		in   string
		n    int
		want string
	}{
		{"", 2, ""},
		{"a\nb", 2, "a\nb"},
		{"a\nb\nc\nd", 2, "a\nb\n… and 2 more"},
	}
	for _, tc := range cases {
		if got := firstLines(tc.in, tc.n); got != tc.want {
			t.Errorf("firstLines(%q, %d) = %q, want %q", tc.in, tc.n, got, tc.want)
		}
	}
}
