package controller

import (
	"errors"
	"strings"
	"testing"

	"github.com/fluxcd/pkg/apis/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/event"

	v2 "github.com/afterhooks/helm-controller/api/v2"
	"github.com/afterhooks/helm-controller/internal/preview"
	"github.com/afterhooks/helm-controller/internal/reconcile"
)

func TestPendingPlanRequestAndActionRequested(t *testing.T) {
	hr := func(annotations map[string]string, mut func(*v2.HelmRelease)) *v2.HelmRelease {
		o := &v2.HelmRelease{ObjectMeta: metav1.ObjectMeta{Generation: 2, Annotations: annotations}}
		o.Status.ObservedGeneration = 2
		if mut != nil {
			mut(o)
		}
		return o
	}
	tests := []struct {
		name        string
		obj         *v2.HelmRelease
		wantPending bool
		wantAct     bool
	}{
		{"no annotation", hr(nil, nil), false, false},
		{"a new token", hr(map[string]string{PlanRequestAnnotation: "a"}, nil), true, false},
		{"a handled token", hr(map[string]string{PlanRequestAnnotation: "a"}, func(o *v2.HelmRelease) { o.Status.LastHandledPlanAt = "a" }), false, false},
		{"an empty token", hr(map[string]string{PlanRequestAnnotation: ""}, nil), false, false},
		{"a spec change pending too", hr(map[string]string{PlanRequestAnnotation: "a"}, func(o *v2.HelmRelease) { o.Generation = 3 }), true, true},
		{"a requestedAt pending too", hr(map[string]string{PlanRequestAnnotation: "a", meta.ReconcileRequestAnnotation: "r"}, nil), true, true},
		{"a requestedAt handled", hr(map[string]string{PlanRequestAnnotation: "a", meta.ReconcileRequestAnnotation: "r"},
			func(o *v2.HelmRelease) { o.Status.LastHandledReconcileAt = "r" }), true, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, pending := pendingPlanRequest(tt.obj); pending != tt.wantPending {
				t.Errorf("pending %t, want %t", pending, tt.wantPending)
			}
			if act := actionRequested(tt.obj); act != tt.wantAct {
				t.Errorf("action requested %t, want %t", act, tt.wantAct)
			}
		})
	}
}

func TestEndsWithPlan(t *testing.T) {
	inSync := &preview.Preview{Step: reconcile.StepNone}
	upgrade := &preview.Preview{Step: reconcile.StepUpgrade}
	settled := &v2.HelmRelease{ObjectMeta: metav1.ObjectMeta{Generation: 2}}
	settled.Status.ObservedGeneration = 2
	changed := settled.DeepCopy()
	changed.Generation = 3
	tests := []struct {
		name string
		obj  *v2.HelmRelease
		pv   *preview.Preview
		err  error
		want bool
	}{
		{"only the plan request, in sync: ends", settled, inSync, nil, true},
		{"only the plan request, a new artifact or values to upgrade to: goes on", settled, upgrade, nil, false},
		{"only the plan request, the plan failed: ends", settled, nil, errors.New("render"), true},
		{"a spec change too, in sync: goes on", changed, inSync, nil, false},
		{"a spec change too, the plan failed: goes on", changed, nil, errors.New("render"), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := endsWithPlan(tt.obj, tt.pv, tt.err); got != tt.want {
				t.Errorf("endsWithPlan %t, want %t", got, tt.want)
			}
		})
	}
}

func TestPlanEventTextIsCut(t *testing.T) {
	short := "upgrade\n"
	if got := planEventText(short); got != short {
		t.Errorf("a short plan was changed: %q", got)
	}
	long := strings.Repeat("é", maxPlanEventLength)
	got := planEventText(long)
	if len(got) > maxPlanEventLength || !strings.HasSuffix(got, planTruncated) || !strings.HasPrefix(got, "é") {
		t.Errorf("cut plan of %d bytes, suffix %q", len(got), got[max(0, len(got)-80):])
	}
	if body := strings.TrimSuffix(got, planTruncated); strings.ContainsRune(body, '\uFFFD') || len(body)%2 != 0 {
		t.Error("the plan was cut inside a character")
	}
}

func TestPlanRequestedPredicate(t *testing.T) {
	with := func(token string) *v2.HelmRelease {
		o := &v2.HelmRelease{}
		if token != "" {
			o.SetAnnotations(map[string]string{PlanRequestAnnotation: token})
		}
		return o
	}
	for _, tt := range []struct {
		old, new string
		want     bool
	}{{"", "a", true}, {"a", "b", true}, {"a", "a", false}, {"a", "", false}, {"", "", false}} {
		if got := (planRequestedPredicate{}).Update(event.UpdateEvent{ObjectOld: with(tt.old), ObjectNew: with(tt.new)}); got != tt.want {
			t.Errorf("%q -> %q: %t, want %t", tt.old, tt.new, got, tt.want)
		}
	}
}
