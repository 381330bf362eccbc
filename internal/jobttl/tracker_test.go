package jobttl

import (
	"context"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
)

// fakeWatcher hands out one fake watch, which the test drives.
type fakeWatcher struct{ w *watch.RaceFreeFakeWatcher }

func (f fakeWatcher) WatchWithContext(context.Context, metav1.ListOptions) (watch.Interface, error) {
	return f.w, nil
}

func job(rv string, succeeded int32, conditions ...batchv1.JobConditionType) *batchv1.Job {
	j := &batchv1.Job{
		TypeMeta:   metav1.TypeMeta{APIVersion: "batch/v1", Kind: "Job"},
		ObjectMeta: metav1.ObjectMeta{Name: "seed", Namespace: "app", ResourceVersion: rv},
		Status:     batchv1.JobStatus{Succeeded: succeeded},
	}
	for _, c := range conditions {
		j.Status.Conditions = append(j.Status.Conditions, batchv1.JobCondition{Type: c, Status: corev1.ConditionTrue})
	}
	return j
}

// TestTrackerSeesHowAJobEnded: what a Tracker reports of a Job that is
// gone, for each way its watch can go, and for a Job it never tracked.
func TestTrackerSeesHowAJobEnded(t *testing.T) {
	tests := []struct {
		name string
		// applied is the state the apply returned.
		applied *batchv1.Job
		// events follow the apply on the Job's watch.
		events        []watch.Event
		wantOutcome   Outcome
		wantSucceeded int64
	}{
		{
			name:    "failed, then deleted",
			applied: job("1", 0),
			events: []watch.Event{
				{Type: watch.Modified, Object: job("2", 0, batchv1.JobFailureTarget, batchv1.JobFailed)},
				{Type: watch.Deleted, Object: job("3", 0, batchv1.JobFailureTarget, batchv1.JobFailed)},
			},
			wantOutcome: Failed,
		},
		{
			name:    "complete, then deleted",
			applied: job("1", 0),
			events: []watch.Event{
				{Type: watch.Modified, Object: job("2", 2, batchv1.JobSuccessCriteriaMet, batchv1.JobComplete)},
				{Type: watch.Deleted, Object: job("3", 2, batchv1.JobSuccessCriteriaMet, batchv1.JobComplete)},
			},
			wantOutcome:   Complete,
			wantSucceeded: 2,
		},
		{
			name:        "deleted while running",
			applied:     job("1", 0),
			events:      []watch.Event{{Type: watch.Deleted, Object: job("2", 0)}},
			wantOutcome: Unknown,
		},
		{
			name:        "watch lost before it finished",
			applied:     job("1", 0),
			events:      []watch.Event{{Type: watch.Error, Object: &metav1.Status{Code: 410}}},
			wantOutcome: Unknown,
		},
		{
			name:          "finished already when applied",
			applied:       job("1", 1, batchv1.JobComplete),
			wantOutcome:   Complete,
			wantSucceeded: 1,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tr := NewTracker()
			fw := watch.NewRaceFreeFake()
			tr.follow(jobKey{namespace: "app", name: "seed"}, tc.applied, fakeWatcher{fw})
			for _, ev := range tc.events {
				fw.Action(ev.Type, ev.Object)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			last, outcome := tr.Last(ctx, "app", "seed")
			if outcome != tc.wantOutcome {
				t.Fatalf("outcome %s, want %s", outcome, tc.wantOutcome)
			}
			if n, _, _ := unstructured.NestedInt64(last.Object, "status", "succeeded"); n != tc.wantSucceeded {
				t.Errorf("last status.succeeded %d, want %d", n, tc.wantSucceeded)
			}
			if last.GetKind() != "Job" {
				t.Errorf("last state has kind %q: kstatus would not judge it as a Job", last.GetKind())
			}
		})
	}
}

func TestTrackerKnowsNothingOfJobsItDidNotApply(t *testing.T) {
	ctx := context.Background()
	if _, o := NewTracker().Last(ctx, "app", "seed"); o != Unknown {
		t.Errorf("an untracked Job is %s, want unknown", o)
	}
	var none *Tracker
	if _, o := none.Last(ctx, "app", "seed"); o != Unknown {
		t.Errorf("a nil tracker says %s, want unknown", o)
	}
	none.Track(nil) // a client without a tracker applies as before
}

// TestTrackerWaitsForTheLastChanges: a wait that finds the Job gone asks
// while the watch may still be delivering its last changes; the answer
// waits for them instead of reporting the Job still running.
func TestTrackerWaitsForTheLastChanges(t *testing.T) {
	tr := NewTracker()
	fw := watch.NewRaceFreeFake()
	tr.follow(jobKey{namespace: "app", name: "seed"}, job("1", 0), fakeWatcher{fw})
	go func() {
		time.Sleep(200 * time.Millisecond)
		fw.Modify(job("2", 0, batchv1.JobFailed))
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, o := tr.Last(ctx, "app", "seed"); o != Failed {
		t.Errorf("outcome %s, want failed", o)
	}
}

// TestTrackerForgetsFinishedJobsAfterKeep bounds its memory.
func TestTrackerForgetsFinishedJobsAfterKeep(t *testing.T) {
	tr := NewTracker()
	now := time.Now()
	tr.now = func() time.Time { return now }
	tr.follow(jobKey{namespace: "app", name: "old"}, job("1", 1, batchv1.JobComplete), nil)
	now = now.Add(DefaultKeep + time.Minute)
	var fresh runtime.Object = job("1", 1, batchv1.JobComplete)
	tr.follow(jobKey{namespace: "app", name: "seed"}, fresh, nil)
	if _, o := tr.Last(context.Background(), "app", "old"); o != Unknown {
		t.Errorf("a Job finished longer ago than keep is still %s", o)
	}
	if _, o := tr.Last(context.Background(), "app", "seed"); o != Complete {
		t.Errorf("a fresh Job is %s, want complete", o)
	}
}
