package framework

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v2 "github.com/afterhooks/helm-controller/api/v2"
)

// PollInterval is how often the helpers look again.
const PollInterval = 250 * time.Millisecond

// Namespace creates a namespace named after the test, deleted when the
// test ends. With HELM_CONTROLLER_E2E_ORACLE=all it also starts the oracle
// (Oracle) on it.
func (e *Env) Namespace(t testing.TB) string {
	t.Helper()
	name := strings.ToLower(fmt.Sprintf("%.40s-%s", strings.ReplaceAll(t.Name(), "/", "-"), rand.String(5)))
	name = strings.Trim(strings.ReplaceAll(name, "_", "-"), "-")
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if err := e.Client.Create(context.Background(), ns); err != nil {
		t.Fatalf("creating namespace %s: %v", name, err)
	}
	t.Cleanup(func() { _ = e.Client.Delete(context.Background(), ns) })
	if oracleForEveryNamespace() {
		e.Oracle(t, name)
	}
	return name
}

// Eventually polls check until it returns nil or the timeout passes, then
// fails the test with the last error. It fails at once when the shared
// controller died, since nothing would change any more.
func (e *Env) Eventually(t testing.TB, timeout time.Duration, what string, check func(ctx context.Context) error) {
	t.Helper()
	if err := e.Poll(timeout, check); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// Poll is Eventually returning the failure instead of failing the test.
func (e *Env) Poll(timeout time.Duration, check func(ctx context.Context) error) error {
	return e.pollEvery(timeout, PollInterval, check)
}

// pollEvery is Poll looking again every interval.
func (e *Env) pollEvery(timeout, interval time.Duration, check func(ctx context.Context) error) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var last error
	for {
		if err := e.Controller.Running(); err != nil {
			return fmt.Errorf("the shared controller: %w", err)
		}
		if last = check(ctx); last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("not true after %s: %w", timeout, last)
		case <-time.After(interval):
		}
	}
}

// Step runs a subtest and stops the parent when it fails: later steps
// build on earlier ones and would only time out.
func Step(t *testing.T, name string, f func(t *testing.T)) {
	t.Helper()
	if !t.Run(name, f) {
		t.FailNow()
	}
}

// Consistently fails the test if check returns an error at any poll during d.
func (e *Env) Consistently(t testing.TB, d time.Duration, what string, check func(ctx context.Context) error) {
	t.Helper()
	// The window's end must not cut short a check in flight: each check
	// gets its own time limit.
	end := time.Now().Add(d)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		err := check(ctx)
		cancel()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if time.Now().After(end) {
			return
		}
		time.Sleep(PollInterval)
	}
}

// Get reads the object namespace/name into obj.
func (e *Env) Get(ctx context.Context, obj client.Object, namespace, name string) error {
	return e.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, obj)
}

// Gone returns nil once obj no longer exists.
func (e *Env) Gone(ctx context.Context, obj client.Object) error {
	err := e.Client.Get(ctx, client.ObjectKeyFromObject(obj), obj)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	return fmt.Errorf("%s still exists (finalizers %v, deletionTimestamp %v)", obj.GetName(), obj.GetFinalizers(), obj.GetDeletionTimestamp())
}

// ReleaseWant is what WaitRelease waits for.
type ReleaseWant struct {
	// Reason is the Ready condition's reason; empty takes any.
	Reason string
	// Version is the Helm revision that must be the latest deployed one;
	// 0 takes any.
	Version int
	// Timeout bounds the wait; a minute when zero.
	Timeout time.Duration
	// PollInterval is how often to look; PollInterval when zero. A
	// benchmark that times releases looks more often.
	PollInterval time.Duration
}

// WaitRelease waits until hr is Ready for its current generation and its
// status agrees: the latest snapshot is deployed (revision Version unless
// 0, tested for TestSucceeded). The controller patches conditions in a
// request before the rest of the status, so Ready alone can be seen before
// the history that goes with it. hr is left as last read.
func (e *Env) WaitRelease(t testing.TB, hr *v2.HelmRelease, want ReleaseWant) {
	t.Helper()
	timeout := want.Timeout
	if timeout == 0 {
		timeout = time.Minute
	}
	interval := want.PollInterval
	if interval == 0 {
		interval = PollInterval
	}
	err := e.pollEvery(timeout, interval, func(ctx context.Context) error {
		if err := e.Get(ctx, hr, hr.Namespace, hr.Name); err != nil {
			return err
		}
		return ReleaseReady(hr, want)
	})
	if err != nil {
		t.Fatalf("HelmRelease %s/%s Ready/%s at revision %d: %v", hr.Namespace, hr.Name, want.Reason, want.Version, err)
	}
}

// WaitNotReady waits up to a minute until hr is Ready=False with reason
// and a message containing contains. hr is left as last read.
func (e *Env) WaitNotReady(t testing.TB, hr *v2.HelmRelease, reason, contains string) {
	t.Helper()
	e.Eventually(t, time.Minute, fmt.Sprintf("Ready=False/%s naming %q", reason, contains), func(ctx context.Context) error {
		if err := e.Get(ctx, hr, hr.Namespace, hr.Name); err != nil {
			return err
		}
		if err := Condition(hr, meta.ReadyCondition, metav1.ConditionFalse, reason); err != nil {
			return err
		}
		if msg := conditions.GetMessage(hr, meta.ReadyCondition); !strings.Contains(msg, contains) {
			return fmt.Errorf("Ready message %q does not contain %q", msg, contains)
		}
		return nil
	})
}

// WaitRolledBack waits until hr records a rollback remediation
// (Remediated=True/RollbackSucceeded) and the history holds the snapshot of
// the rollback, revision 3 or later (install, failed upgrade, rollback).
// Flux's patch helper writes the conditions and the rest of the status in
// two requests, so the condition alone can come before the history.
func (e *Env) WaitRolledBack(t testing.TB, hr *v2.HelmRelease, timeout time.Duration) {
	t.Helper()
	e.Eventually(t, timeout, "the failed upgrade rolled back", func(ctx context.Context) error {
		if err := e.Get(ctx, hr, hr.Namespace, hr.Name); err != nil {
			return err
		}
		if err := Condition(hr, helmv2.RemediatedCondition, metav1.ConditionTrue, helmv2.RollbackSucceededReason); err != nil {
			return err
		}
		if latest := hr.Status.History.Latest(); latest == nil || latest.Version < 3 {
			return fmt.Errorf("history %s, waiting for the rollback's snapshot", Snapshots(hr.Status.History))
		}
		return nil
	})
}

// ReleaseReady returns nil when hr, as read, is what WaitRelease waits for.
func ReleaseReady(hr *v2.HelmRelease, want ReleaseWant) error {
	if hr.Status.ObservedGeneration != hr.Generation || hr.Status.LastAttemptedGeneration != hr.Generation {
		return fmt.Errorf("generation %d, observed %d, last attempted %d",
			hr.Generation, hr.Status.ObservedGeneration, hr.Status.LastAttemptedGeneration)
	}
	if err := Condition(hr, meta.ReadyCondition, metav1.ConditionTrue, want.Reason); err != nil {
		return err
	}
	latest := hr.Status.History.Latest()
	if latest == nil || latest.Status != "deployed" || (want.Version > 0 && latest.Version != want.Version) {
		return fmt.Errorf("history %s, waiting for revision %d deployed", Snapshots(hr.Status.History), want.Version)
	}
	if want.Reason == helmv2.TestSucceededReason && !latest.HasBeenTested() {
		return fmt.Errorf("history %s, waiting for the tests to be recorded", Snapshots(hr.Status.History))
	}
	return nil
}

// Condition returns nil when obj's condition typ has the status and, unless
// reason is empty, the reason.
func Condition(obj conditions.Getter, typ string, status metav1.ConditionStatus, reason string) error {
	c := conditions.Get(obj, typ)
	if c == nil {
		return fmt.Errorf("no %s condition (conditions: %s)", typ, Conditions(obj))
	}
	if c.Status != status || (reason != "" && c.Reason != reason) {
		want := string(status)
		if reason != "" {
			want += "/" + reason
		}
		return fmt.Errorf("%s=%s/%s %q, want %s", typ, c.Status, c.Reason, c.Message, want)
	}
	return nil
}

// Ready returns nil when obj's Ready condition is True, whatever its
// reason.
func Ready(obj conditions.Getter) error {
	return Condition(obj, meta.ReadyCondition, metav1.ConditionTrue, "")
}

// Conditions lists obj's conditions as Type=Status/Reason.
func Conditions(obj conditions.Getter) string {
	var out []string
	for _, c := range obj.GetConditions() {
		out = append(out, fmt.Sprintf("%s=%s/%s", c.Type, c.Status, c.Reason))
	}
	return strings.Join(out, " ")
}

// Snapshots describes a release history in one line.
func Snapshots(h helmv2.Snapshots) string {
	var out []string
	for _, s := range h {
		entry := fmt.Sprintf("v%d %s (%s) %s@%s config %s", s.Version, s.Status, s.Action, s.ChartName, s.ChartVersion, s.ConfigDigest)
		if s.TestHooks != nil {
			entry += fmt.Sprintf(" %d test hooks", len(s.GetTestHooks()))
			for name, h := range s.GetTestHooks() {
				entry += fmt.Sprintf(" %s=%s", name, h.Phase)
			}
		}
		out = append(out, entry)
	}
	return "[" + strings.Join(out, "; ") + "]"
}
